"""A difference float32's rounding hides is confirmed with torch's default dtype float64 (issue 28's per-rank
eps): a LayerNorm whose eps depends on the rank changes the all-reduced output by 4e-6 of its size, within
float32's tolerance, so torch in float32 computes "the same" on one device and on the ranks and the finding
was `unsupported` ("the verifier's model disagrees with torch"); the same runs in float64 show the numbers
apart, and it is a violation.  Twins k13, each backed by plain gloo runs (1 rank against 2) in both dtypes."""
from __future__ import annotations

import numpy as np
import pytest
from case_runs import CASES, gloo_outputs, marked_line, translate

pytest.importorskip("torch")

pytestmark = pytest.mark.torch


def test_the_right_twin_is_verified():
    code, body = translate("k13_per_rank_eps_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_per_rank_eps_is_a_violation_confirmed_in_float64():
    code, body = translate("k13_per_rank_eps_bug.py")
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    assert errors[0]["line"] == marked_line(CASES / "k13_per_rank_eps_bug.py"), errors[0]
    assert "with torch's default dtype float64" in errors[0]["message"], errors[0]["message"]


@pytest.mark.parametrize("name", ["k13_per_rank_eps_ok.py", "k13_per_rank_eps_bug.py"])
def test_gloo_in_float64_tells_the_twins_apart_where_float32_cannot(name):
    def agree(dtype, rtol, atol):
        [one] = gloo_outputs(name, 1, dtype=dtype)
        return all(np.allclose(one, rank, rtol=rtol, atol=atol) for rank in gloo_outputs(name, 2, dtype=dtype))

    assert agree("float32", 1e-4, 1e-5)   # float32's rounding: the twins look alike
    assert agree("float64", 1e-9, 1e-12) == name.endswith("_ok.py")
