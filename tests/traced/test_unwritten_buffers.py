"""A buffer torch.empty made and nothing wrote is where the values go wrong (a dropped collective that
should have filled it): twins k5_reduce_scatter_buffer_{ok,bug}.py, backed by real gloo runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"
OK, BUG = "k5_reduce_scatter_buffer_ok.py", "k5_reduce_scatter_buffer_bug.py"


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


def test_the_filled_buffer_is_verified():
    code, body = translate(OK)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_the_unfilled_buffer_is_named_at_its_allocation():
    code, body = translate(BUG)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    (marked,) = [n for n, text in enumerate((CASES / BUG).read_text().splitlines(), 1) if "# the bug" in text]
    assert errors[0]["line"] == marked and "nothing wrote before it was read" in errors[0]["message"], errors[0]


def test_gloo_runs_back_both():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    ok, bug = gt.run_jobs([gt.Job(gt.JobSpec(str(CASES / name), mode="forward"), 2) for name in (OK, BUG)])
    assert (ok.status, bug.status) == (gt.STATUS_MATCH, gt.STATUS_MISMATCH), (ok.error, bug.error)
