"""An asynchronous all-reduce that averages where it must sum (issue 25's reduce-op mutants of megatron-core's
backward): gloo sums, then divides when the wait is made; the division is the all-reduce's and is named at its
line, not at the wait's.  Twins, gloo ground truth (1 vs 2 ranks), the expected line found by the case's
"# the bug" marker (the tool never reads it)."""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"

pytestmark = pytest.mark.torch


def test_the_summing_twin_is_verified():
    pytest.importorskip("torch")
    code, body = translate("k17_async_average_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_an_asynchronous_average_is_named_at_the_all_reduce_not_the_wait():
    pytest.importorskip("torch")
    code, body = translate("k17_async_average_bug.py")
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert first["line"] == marked_line(CASES / "k17_async_average_bug.py"), first
    assert "first go wrong at aten.div_" in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    names = ["k17_async_average_ok.py", "k17_async_average_bug.py"]
    statuses = gloo_statuses(names)
    assert statuses["k17_async_average_ok.py"][0] == MATCH, statuses
    assert statuses["k17_async_average_bug.py"][0] == MISMATCH, statuses
