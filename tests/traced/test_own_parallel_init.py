"""A training script sets up its parallel sizes itself (``parallel_state.initialize_model_parallel(
tensor_model_parallel_size=1)``: every rank data-parallel).  The launcher's set-up the tool makes first
(all ranks one tensor-parallel group) made that call raise "data parallel group is already initialized"
(an input error); the code's own call now replaces it, and the report says so.  Twins k8, each backed by
plain gloo runs of the file (1 rank against 2)."""
from __future__ import annotations

import numpy as np
import pytest
from case_runs import gloo_outputs, translate

pytest.importorskip("torch")
pytest.importorskip("megatron.core")

pytestmark = pytest.mark.torch

EXPECTED = {"k8_own_parallel_init_ok.py": (0, "verified"), "k8_own_parallel_init_bug.py": (1, "violations")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_codes_own_parallel_sizes_replace_the_launchers(name):
    code, body = translate(name, timeout=600)
    messages = [d["message"] for d in body["diagnostics"]]
    assert (code, body["verdict"]) == EXPECTED[name], messages
    assert any("the code's own call set up the parallel sizes" in m for m in messages)
    assert not any("set up as a launcher would" in m for m in messages)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gloo_backs_the_stated_verdict(name):
    [one] = gloo_outputs(name, 1)
    agree = all(np.allclose(one, rank, rtol=1e-6, atol=1e-8) for rank in gloo_outputs(name, 2))
    assert agree == (EXPECTED[name][1] == "verified")
