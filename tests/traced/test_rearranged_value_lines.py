"""Where values rearranged by layout ops first go wrong (issue 25, the bug's own line): twin cases, gloo ground
truth (1 vs 2 ranks), the expected line found by the case's "# the bug" marker (the tool never reads it).

* k30: Ulysses attention whose received all-to-all buffer is transposed before it is flattened: the reshapes
  and permutes before the exchange give values of shapes no block of one device's, which say nothing about
  the values (they are as right as what they are made from): the flattening of the transposed buffer, the
  first value that can be compared, is named, not the first reshape of the rank's shard;
* k31: gathered column blocks concatenated along the rows: each piece the all-gather delivers is a right
  block of one device's value, the concatenation puts them where they do not lie: the concatenation is
  named, not the all-gather.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
TWINS = ["k30_ulysses_transpose", "k31_gather_cat_dim"]

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("twin", TWINS)
def test_the_right_twin_is_verified(twin):
    pytest.importorskip("torch")
    code, body = translate(f"{twin}_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_values_of_no_block_shape_are_judged_by_what_they_are_made_from():
    pytest.importorskip("torch")
    first = first_error("k30_ulysses_transpose_bug.py")
    assert first["line"] == marked_line(CASES / "k30_ulysses_transpose_bug.py"), first


def test_right_pieces_concatenated_along_another_dim_are_named_at_the_concatenation():
    pytest.importorskip("torch")
    first = first_error("k31_gather_cat_dim_bug.py")
    assert first["line"] == marked_line(CASES / "k31_gather_cat_dim_bug.py"), first
    assert "aten.cat" in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    names = [f"{twin}_{kind}.py" for twin in TWINS for kind in ("ok", "bug")]
    statuses = gloo_statuses(names)
    for twin in TWINS:
        assert statuses[f"{twin}_ok.py"][0] == MATCH, statuses
        assert statuses[f"{twin}_bug.py"][0] == MISMATCH, statuses
