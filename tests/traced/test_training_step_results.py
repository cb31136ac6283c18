"""A training step written by hand (issue 25's "gradients of every input"): its own backward, an
in-place update under no_grad, a detached copy returned.  Twin cases, gloo ground truth (1 vs 2 ranks):

* y1: the update's result read through ``detach()`` after the in-place ``sub_`` (the detach shares the
  weight's version counter only after the dispatch mode returns: it was "changed in place through a
  path the recorder cannot follow", unsupported); the bug twin sums the gradient instead of averaging;
* y2: nothing to differentiate in the output, but the step's own backward leaves a gradient on its
  trainable batch, world times one device's: compared as the ground truth compares it (it was
  verified with "no backward pass was recorded").
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
BUGS = ["y1_sgd_step_detached_bug.py", "y2_step_batch_gradient_bug.py"]

pytestmark = pytest.mark.torch


def test_the_detached_result_of_an_in_place_step_is_verified():
    pytest.importorskip("torch")
    code, body = translate("y1_sgd_step_detached_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


@pytest.mark.parametrize("name", BUGS)
def test_the_steps_bug_is_found_at_its_line(name):
    pytest.importorskip("torch")
    first = first_error(name)
    assert first["check"] == "equivalence" and "reproduced by torch" in first["message"], first
    assert first["line"] == marked_line(CASES / name), first


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses(["y1_sgd_step_detached_ok.py"] + BUGS)
    assert statuses["y1_sgd_step_detached_ok.py"][0] == MATCH, statuses
    assert all(statuses[name][0] == MISMATCH for name in BUGS), statuses
