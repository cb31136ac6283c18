"""A custom Function's backward whose ``return`` spans several lines, returning a gradient autograd
rejects on the ranks (b2 twin cases): named at the element of the returned tuple that made it (the one
tensor of the shape torch says it got), not at the line the ``return`` starts on.  Gloo ground truth
(inputs trainable, 1 vs 2 ranks): the right twin matches one device, the buggy one raises on the ranks.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from case_runs import CASES, marked_line, translate

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]


def test_the_right_backward_is_verified_forward_and_backward():
    code, body = translate("b2_multiline_backward_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert body["passes"]["backward"] == "proven", body["passes"]


def test_a_rejected_gradient_is_named_at_its_element_of_the_returned_tuple():
    code, body = translate("b2_multiline_backward_bug.py")
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    assert "returned an invalid gradient" in errors[0]["message"], errors[0]
    assert (errors[0]["line"], errors[0]["file"]) == (marked_line(CASES / "b2_multiline_backward_bug.py"), None)


def test_gloo_runs_back_the_twins():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    names = ("b2_multiline_backward_ok.py", "b2_multiline_backward_bug.py")
    results = gt.run_jobs([gt.Job(gt.JobSpec(str(CASES / name), mode="grad"), 2) for name in names])
    statuses = {name: result.status for name, result in zip(names, results)}
    assert statuses == {"b2_multiline_backward_ok.py": gt.STATUS_MATCH,
                        "b2_multiline_backward_bug.py": gt.STATUS_ERROR}, \
        {name: (r.status, (r.error or "")[-300:]) for name, r in zip(names, results)}
