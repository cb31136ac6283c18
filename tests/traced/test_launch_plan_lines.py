"""A launch script's plan named where its style was made (issue 25).  Twin cases, gloo ground truth (1 vs 2
ranks), the expected line found by the case's "# the bug" marker (the tool never reads it).

* k25: a torchrun script whose plan gives the first layer RowwiseParallel: the ranks raise in DTensor's
  sharding propagation at the forward's matmul.  The parameters it reads were made by the style made at the
  plan's line; a launch script's parameters are made inside the run (no entry's are bound before it), so the
  lines that made them are kept while it runs (was the matmul's line, the forward's).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, RAISES, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"

pytestmark = pytest.mark.torch


def test_the_right_plan_is_verified():
    pytest.importorskip("torch")
    code, body = translate("k25_launch_plan_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_wrong_style_in_a_launch_script_is_named_where_it_was_made():
    pytest.importorskip("torch")
    first = first_error("k25_launch_plan_bug.py")
    assert first["line"] == marked_line(CASES / "k25_launch_plan_bug.py"), first
    assert "whose placements were chosen at line" in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses(["k25_launch_plan_ok.py", "k25_launch_plan_bug.py"])
    assert statuses["k25_launch_plan_ok.py"][0] == MATCH, statuses
    assert statuses["k25_launch_plan_bug.py"][0] == RAISES, statuses   # the ranks raise
