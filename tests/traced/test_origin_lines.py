"""Where the values first go wrong, when the walk back has more than one way to go (issue 28's seeded
faults in megatron-core): twin cases, gloo ground truth (1 vs 2 ranks), the expected line found by the
case's "# the bug" marker (the tool never reads it).

* k11: a sequence-parallel backward's reduce-scatter takes the MAX (one line runs every layer's): the
  earliest op the wrong gradient comes from whose operands agree is that reduce-scatter; a walk through the
  latest wrong operand ended at a view autograd made for the in-place attention mask;
* k12: a sequence-parallel scatter cut one row short makes the ranks raise at a pick indexed by
  ``torch.arange(logits.size(0))``: the arange reads no value (its size came through Python), so the shape
  is followed to the value it was read off, and on to the slice that made it;
* k14: a down projection cut along the wrong dim makes the ranks raise at a matmul between a column-parallel
  h (a block of the contracted dim) and a piece the code cut along another dim, keeping that dim whole: the
  piece's cut is named, not h's cut on the line above.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, RAISES, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
TWINS = ["k11_sp_backward_reduce_scatter", "k12_sp_slice_bound", "k14_tp_mlp_down_cut"]

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("twin", TWINS)
def test_the_right_twin_is_verified(twin):
    pytest.importorskip("torch")
    code, body = translate(f"{twin}_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_wrong_reduce_scatter_feeding_later_layers_is_named_at_its_line():
    pytest.importorskip("torch")
    first = first_error("k11_sp_backward_reduce_scatter_bug.py")
    assert first["line"] == marked_line(CASES / "k11_sp_backward_reduce_scatter_bug.py"), first
    assert "first go wrong at reduce_scatter" in first["message"], first["message"]


def test_a_size_read_off_a_short_value_is_followed_to_the_slice_that_made_it():
    pytest.importorskip("torch")
    first = first_error("k12_sp_slice_bound_bug.py")
    assert first["line"] == marked_line(CASES / "k12_sp_slice_bound_bug.py"), first
    assert "raises where the single-device run does not" in first["message"]
    assert "made at aten.slice.Tensor" in first["message"], first["message"]


def test_a_piece_cut_along_another_dim_than_its_partner_block_is_named_at_its_cut():
    pytest.importorskip("torch")
    first = first_error("k14_tp_mlp_down_cut_bug.py")
    assert first["line"] == marked_line(CASES / "k14_tp_mlp_down_cut_bug.py"), first
    assert "raises where the single-device run does not" in first["message"]
    assert "was made at" not in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    names = [f"{twin}_{kind}.py" for twin in TWINS for kind in ("ok", "bug")]
    statuses = gloo_statuses(names)
    assert statuses["k11_sp_backward_reduce_scatter_ok.py"][0] == MATCH, statuses
    assert statuses["k12_sp_slice_bound_ok.py"][0] == MATCH, statuses
    assert statuses["k14_tp_mlp_down_cut_ok.py"][0] == MATCH, statuses
    assert statuses["k14_tp_mlp_down_cut_bug.py"][0] == RAISES, statuses   # the ranks raise
    assert statuses["k11_sp_backward_reduce_scatter_bug.py"][0] == MISMATCH, statuses
    assert statuses["k12_sp_slice_bound_bug.py"][0] == RAISES, statuses   # the ranks raise
