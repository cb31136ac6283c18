"""Where a Ulysses exchange's values first go wrong (issue 25): the rank views its value as [world, ...]
before an all-to-all where one device has [1, ...]; such a value is no block of one device's, though it holds
the right numbers.  Twin cases, gloo ground truth (1 vs 2 ranks), the expected line found by the case's
"# the bug" marker (the tool never reads it).

* k23 after: the permute after the second all-to-all takes the wrong dims: named at its line, compared with
  one device's once the same adjacent dims are merged in both (was the reshape before the all-to-all, the
  first value of another grouping);
* k23 before: the permute laying out the first all-to-all's input takes the wrong dims: the exchange's result
  is the first wrong value, and the layout handed to it is where the repair goes.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
OK, BUGS = "k23_ulysses_permute_ok.py", ["k23_ulysses_permute_after_bug.py", "k23_ulysses_permute_before_bug.py"]

pytestmark = pytest.mark.torch


def test_the_right_twin_is_verified():
    pytest.importorskip("torch")
    code, body = translate(OK)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


@pytest.mark.parametrize("bug", BUGS)
def test_a_wrong_permute_around_the_all_to_all_is_named_at_its_line(bug):
    pytest.importorskip("torch")
    code, body = translate(bug)
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert first["line"] == marked_line(CASES / bug), first
    assert "first go wrong at aten.permute" in first["message"] or "first go wrong at aten._unsafe_view" \
        in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses([OK, *BUGS])
    assert statuses[OK][0] == MATCH, statuses
    assert all(statuses[bug][0] == MISMATCH for bug in BUGS), statuses
