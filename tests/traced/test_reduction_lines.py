"""Where a missing reduction goes (issue 25, the repair line of a dropped collective): the finding stays at
the line where the values first go wrong, and its ``repair_line`` is the line that made the partial sum,
after which the all-reduce is inserted (verifier/reduction_lines.py).  Twin cases, gloo ground truth (1 vs
2 ranks), the expected repair line found by the case's "# the bug" marker (the tool never reads it).

* k19: row sums of a column-parallel activation read (through ``/ OUT``) before any all-reduce: named at
  the reading line, repaired after the sum's line;
* k20: a row-parallel partial sum returned as it is: named at the ``return``, repaired after the matmul's line.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
TWINS = ["k19_stats_reduction", "k20_unreduced_return"]

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("twin", TWINS)
def test_the_right_twin_is_verified(twin):
    pytest.importorskip("torch")
    code, body = translate(f"{twin}_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_partial_sum_read_before_its_reduction_is_repaired_after_the_line_that_made_it():
    pytest.importorskip("torch")
    first = first_error("k19_stats_reduction_bug.py")
    made = marked_line(CASES / "k19_stats_reduction_bug.py")
    assert (first["line"], first["repair_line"]) == (made + 1, made), first
    assert f"made at line {made}: the reduction it misses belongs after that line" in first["message"]


def test_a_partial_sum_returned_unreduced_is_repaired_after_the_line_that_made_it():
    pytest.importorskip("torch")
    first = first_error("k20_unreduced_return_bug.py")
    made = marked_line(CASES / "k20_unreduced_return_bug.py")
    assert (first["line"], first["repair_line"]) == (made + 1, made), first


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    names = [f"{twin}_{kind}.py" for twin in TWINS for kind in ("ok", "bug")]
    statuses = gloo_statuses(names)
    for twin in TWINS:
        assert statuses[f"{twin}_ok.py"][0] == MATCH, statuses
        assert statuses[f"{twin}_bug.py"][0] == MISMATCH, statuses
