"""Where a wrong pick out of a Python list goes (issue 25, the bug's own line): ``mine = layers[a:b]`` picks a
rank's layers with no op torch records, so the values first go wrong later, at the matmul reading a layer the
rank should not apply, whose operands are each one device's values.  The line trace keeps, on the op's span,
the earlier line whose subscript picked an operand (``Span.picked``, frontends/traced/bindings.py), and the
finding's ``repair_line`` is that line when the ranks' picks there are no sharing of one device's: a layer
picked on two ranks, or on none (verifier/picked_lines.py).  Twin case, gloo ground truth (1 vs 2
ranks), the expected line found by the case's "# the bug" marker (the tool never reads it).

* q1: pipeline stages over send/recv whose slice of the layer list ends one layer late: named at the
  matmul, repaired at the slice.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
TWIN = "q1_stage_layers"

pytestmark = pytest.mark.torch


def test_the_right_twin_is_verified():
    pytest.importorskip("torch")
    code, body = translate(f"{TWIN}_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_wrong_slice_of_a_python_list_is_repaired_at_the_slice():
    pytest.importorskip("torch")
    first = first_error(f"{TWIN}_bug.py")
    picked = marked_line(CASES / f"{TWIN}_bug.py")
    assert first["line"] != picked and first["repair_line"] == picked, first
    assert f"it reads mine, picked at line {picked} out of a Python list or tuple" in first["message"]
    # rank 0 applies the first layer of rank 1 too: one of the 4 layers is picked on both ranks
    assert "of the 4 value(s) one device's ops read through that pick, the 2 ranks' ops read 1 on more than one " \
           "rank" in first["message"]


def test_gloo_runs_back_the_twin():
    pytest.importorskip("torch")
    statuses = gloo_statuses([f"{TWIN}_ok.py", f"{TWIN}_bug.py"])
    assert statuses[f"{TWIN}_ok.py"][0] == MATCH, statuses
    assert statuses[f"{TWIN}_bug.py"][0] == MISMATCH, statuses
