"""A custom Function whose backward returns a gradient autograd rejects (wrong shape) is the program's
error, not a backward the tool "could not run outside the code's context": it used to end as
``verified`` on the forward pass alone (a megatron-core mutant, ``grad_bias`` summed over the wrong
dim, in the library mutation campaign).  Twin cases, gloo ground truth (1 vs 2 ranks)."""
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


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--mesh", "tp=2",
                          "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


def test_a_passing_gradient_is_verified_with_its_backward():
    code, body = translate("b1_custom_backward_shape_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert body["passes"]["backward"] == "proven", body.get("passes")


def test_a_rejected_gradient_is_the_programs_error_not_verified():
    code, body = translate("b1_custom_backward_shape_bug.py")
    assert (code, body["verdict"]) == (2, "input-error"), body["diagnostics"]
    assert "returned an invalid gradient" in body["diagnostics"][0]["message"], body["diagnostics"]


def test_gloo_runs_back_both():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    ok, bug = rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=60.0), 2)
                           for name in ("b1_custom_backward_shape_ok.py", "b1_custom_backward_shape_bug.py")])
    assert ok.status == rw.STATUS_MATCH, (ok.error, ok.details)
    assert bug.status != rw.STATUS_MATCH and "returned an invalid gradient" in (bug.error or ""), (bug.status, bug.error)
