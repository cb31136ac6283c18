"""An output returned as a piece, made inside a layer given a parallel style (issue 25).  Twin cases, gloo
ground truth (1 vs 2 ranks), the expected line found by the case's "# the bug" marker (the tool never reads it).

* k26: a DTensor plan makes the down projection ColwiseParallel: each rank returns its piece of the output's
  last dim.  The finding stays at the return (where the values are compared); its repair line is the line
  that built the layer in whose forward the piece was made, where its style was chosen (was none).
* k29: the up projection's ColwiseParallel hands out its local output, and the softmax over the last dim runs on
  each rank's piece.  The finding is the softmax (where the values first go wrong); its repair line is the line
  that chose the style of the layer that handed the piece out (``traced_check._handed``; was none).
* k37: an LM head whose ColwiseParallel hands out its local logits (use_local_output=True) to F.cross_entropy:
  a rank fails at the loss, a label out of its block's range.  The finding is the loss; its repair line is the
  line that chose the head's style: the log-softmax before the loss read the piece the head handed out.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, RAISES, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"

pytestmark = pytest.mark.torch


def test_the_right_plan_is_verified():
    pytest.importorskip("torch")
    code, body = translate("k26_plan_output_piece_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_piece_made_in_a_styled_layer_is_repaired_where_the_style_was_made():
    pytest.importorskip("torch")
    first = first_error("k26_plan_output_piece_bug.py")
    assert first["repair_line"] == marked_line(CASES / "k26_plan_output_piece_bug.py"), first
    assert "the rank returns its piece of dim 1" in first["message"], first["message"]


def test_a_piece_a_styled_layer_hands_out_is_repaired_where_the_style_was_made():
    pytest.importorskip("torch")
    first = first_error("k29_plan_local_piece_bug.py")
    assert "go wrong at aten._softmax" in first["message"] and first["line"] == 19, first
    assert first["repair_line"] == marked_line(CASES / "k29_plan_local_piece_bug.py"), first


def test_the_right_loss_parallel_head_is_verified():
    pytest.importorskip("torch")
    code, body = translate("k37_loss_parallel_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_rank_failing_on_a_piece_a_styled_layer_hands_out_is_repaired_where_the_style_was_made():
    pytest.importorskip("torch")
    first = first_error("k37_loss_parallel_local_bug.py")
    assert "fails where the single-device run does not" in first["message"], first["message"]
    assert "class index out of range" in first["message"], first["message"]
    assert first["repair_line"] == marked_line(CASES / "k37_loss_parallel_local_bug.py"), first


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses(["k26_plan_output_piece_ok.py", "k26_plan_output_piece_bug.py",
                              "k29_plan_local_piece_bug.py", "k37_loss_parallel_ok.py",
                              "k37_loss_parallel_local_bug.py"])
    assert statuses["k37_loss_parallel_ok.py"][0] == MATCH, statuses
    assert statuses["k37_loss_parallel_local_bug.py"][0] == RAISES, statuses
    assert statuses["k26_plan_output_piece_ok.py"][0] == MATCH, statuses
    assert statuses["k26_plan_output_piece_bug.py"][0] == MISMATCH, statuses
    assert statuses["k29_plan_local_piece_bug.py"][0] == MISMATCH, statuses
