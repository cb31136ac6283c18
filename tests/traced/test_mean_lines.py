"""Where a data-parallel mean goes wrong (issue 25): each rank's mean over its equal share of the batch is
no wrong value (the ranks' means average to the single device's, as their sum makes it for a partial sum),
so the culprit walk passes it by, as it passes partial sums.  Twin cases, gloo ground truth (1 vs 2 ranks),
the expected line found by the case's "# the bug" marker (the tool never reads it).

* k21: the ranks' mean losses all-reduced with MAX: named at the all-reduce (it was the mean's line);
* k22: each rank's mean loss handed back unaveraged: named at the copy made of it (it was the loss's line);
* k23: the ranks' mean losses all-reduced and handed back summed (the division by the world size dropped):
  named at the all-reduce, with the return, where its result is read next, as the repair line (it had none).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
TWINS = ["k21_dp_loss_average", "k22_dp_loss_not_averaged"]

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("twin", TWINS)
def test_the_right_twin_is_verified(twin):
    pytest.importorskip("torch")
    code, body = translate(f"{twin}_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


@pytest.mark.parametrize("twin", TWINS)
def test_a_mean_of_the_ranks_share_is_passed_by(twin):
    pytest.importorskip("torch")
    first = first_error(f"{twin}_bug.py")
    assert first["line"] == marked_line(CASES / f"{twin}_bug.py"), first


def test_means_summed_not_averaged_are_repaired_where_the_sum_is_read():
    pytest.importorskip("torch")
    first = first_error("k23_dp_loss_summed_bug.py")
    bug = marked_line(CASES / "k23_dp_loss_summed_bug.py")
    assert (first["line"], first["repair_line"]) == (bug - 1, bug), first
    assert "the world size times one device's value" in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    names = [f"{twin}_{kind}.py" for twin in TWINS for kind in ("ok", "bug")] + ["k23_dp_loss_summed_bug.py"]
    statuses = gloo_statuses(names)
    assert statuses["k23_dp_loss_summed_bug.py"][0] == MISMATCH, statuses
    for twin in TWINS:
        assert statuses[f"{twin}_ok.py"][0] == MATCH, statuses
        assert statuses[f"{twin}_bug.py"][0] == MISMATCH, statuses
