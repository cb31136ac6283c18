"""Where values rearranged by layout ops first go wrong (issue 25, the bug's own line): twin cases, gloo ground
truth (1 vs 2 ranks), the expected line found by the case's "# the bug" marker (the tool never reads it).

* k30: Ulysses attention whose received all-to-all buffer is transposed before it is flattened: the reshapes
  and permutes before the exchange give values of shapes no block of one device's, which say nothing about
  the values (they are as right as what they are made from): the flattening of the transposed buffer, the
  first value that can be compared, is named, not the first reshape of the rank's shard;
* k31: gathered column blocks concatenated along the rows: each piece the all-gather delivers is a right
  block of one device's value, the concatenation puts them where they do not lie: the concatenation is
  named, not the all-gather;
* k34: a column-parallel product all-gathered into one buffer (the ranks' blocks stacked along dim 0) and
  re-assembled by chunk and cat.  With the all-gather dropped the chunk's views read memory nothing wrote:
  named at the allocation, not at the concatenation of its views.  Chunked along the columns, the output
  has another shape: the stack of right blocks is no wrong shape yet, the chunk that mixes them is named,
  not the all-gather.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
TWINS = ["k30_ulysses_transpose", "k31_gather_cat_dim"]
GATHERED = ["k34_gathered_buffer_unfilled_bug.py", "k34_gathered_buffer_chunk_dim_bug.py"]

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("name", [f"{twin}_ok.py" for twin in TWINS] + ["k34_gathered_buffer_ok.py"])
def test_the_right_twin_is_verified(name):
    pytest.importorskip("torch")
    code, body = translate(name)
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


def test_a_gathered_buffer_nothing_filled_is_named_at_its_allocation():
    pytest.importorskip("torch")
    first = first_error(GATHERED[0])
    assert first["line"] == marked_line(CASES / GATHERED[0]), first
    assert "nothing wrote before it was read" in first["message"], first["message"]


def test_a_gathered_buffer_chunked_along_another_dim_is_named_at_the_chunk():
    pytest.importorskip("torch")
    first = first_error(GATHERED[1])
    assert first["line"] == marked_line(CASES / GATHERED[1]), first
    assert "has shape (8, 4) on rank 0 but (4, 8) on one device" in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    names = [f"{twin}_{kind}.py" for twin in TWINS for kind in ("ok", "bug")] + ["k34_gathered_buffer_ok.py", *GATHERED]
    statuses = gloo_statuses(names)
    for twin in TWINS:
        assert statuses[f"{twin}_ok.py"][0] == MATCH, statuses
        assert statuses[f"{twin}_bug.py"][0] == MISMATCH, statuses
    assert statuses["k34_gathered_buffer_ok.py"][0] == MATCH, statuses
    assert all(statuses[name][0] == MISMATCH for name in GATHERED), statuses
