"""Point-to-point bugs named where the repair goes (issue 25).  Twin cases, gloo ground truth (1 vs 2 ranks),
the expected line found by the case's "# the bug" marker (the tool never reads it).

* k24: a ring's recv asks for tag 1 while the sends keep the default 0: no message meets (gloo hangs).  Both the
  send and the recv are left unmatched and both are listed; the side asking for a tag other than the default
  comes first (it chose the tag), not the send the channel order put first.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from case_runs import MATCH, REPO, first_error, marked_line, translate

CASES = Path(__file__).parent / "cases"

pytestmark = pytest.mark.torch


def test_the_right_ring_is_verified():
    pytest.importorskip("torch")
    code, body = translate("k24_ring_tag_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_tag_mismatch_is_named_at_the_side_asking_for_another_tag():
    pytest.importorskip("torch")
    first = first_error("k24_ring_tag_bug.py")
    assert first["line"] == marked_line(CASES / "k24_ring_tag_bug.py"), first
    assert "the tags differ, and tag 1 is not the default 0" in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    ok, bug = rw.run_jobs([rw.Job(rw.Spec(str(CASES / "k24_ring_tag_ok.py"), timeout=60)),
                           rw.Job(rw.Spec(str(CASES / "k24_ring_tag_bug.py"), timeout=5, expect_hang=True))])
    assert ok.status == MATCH, ok
    assert bug.status == rw.STATUS_TIMEOUT, bug   # the ranks hang in the recv
