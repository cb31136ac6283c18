"""Code that accepts only leaves as inputs (DTensor's ``distribute_tensor`` of an input example_inputs()
made trainable, as torchtitan-style drivers do): the tool hands its inputs over as activations (clones)
and the reference run raised "should be used to distribute leaf tensors" (an input error on a correct
file); such inputs are now handed over as the leaves example_inputs() made, in the traced runs and in
the real-rank confirmation.  Twin cases, gloo ground truth (1 vs 2 ranks)."""
from __future__ import annotations

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, translate

pytestmark = pytest.mark.torch


def test_a_driver_distributing_its_trainable_input_is_verified():
    pytest.importorskip("torch")
    code, body = translate("z1_distributed_input_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert any("handed over as the leaves" in d["message"] for d in body["diagnostics"]), body["diagnostics"]


def test_its_bug_twin_is_a_violation_torch_reproduces():
    pytest.importorskip("torch")
    first = first_error("z1_distributed_input_bug.py")
    assert first["check"] == "equivalence" and "reproduced by torch" in first["message"], first


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses(["z1_distributed_input_ok.py", "z1_distributed_input_bug.py"])
    assert statuses["z1_distributed_input_ok.py"][0] == MATCH, statuses
    assert statuses["z1_distributed_input_bug.py"][0] == MISMATCH, statuses
