"""Twin cases around fairscale's own model-parallel code (real library, gloo ground truth).

fairscale's ``_reduce`` marks its input dirty and returns it (autograd bumps the tensor's version
with no op the recorder sees), and the code calls fairscale's ``initialize_model_parallel`` itself on
every world it runs on: both used to stop the traced run ("changed in place through a path the
recorder cannot follow"; "data parallel group is already initialized").
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("fairscale")

pytestmark = [pytest.mark.torch, pytest.mark.realcode]

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--mesh", "tp=2",
                          "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


def test_fairscale_mappings_with_their_own_groups_are_verified():
    code, body = translate("r1_fairscale_mappings_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_forgotten_copy_to_region_leaves_the_input_gradient_partial():
    code, body = translate("r1_fairscale_mappings_bug.py")
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    assert "gradient of x" in errors[0]["message"], errors


def test_gloo_runs_back_both_verdicts():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    # one run_jobs each: its workers run drivers one after another, and fairscale's groups (set up by
    # the code itself) outlive a driver there
    ok, bug = [rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=60.0), 2)])[0]
               for name in ("r1_fairscale_mappings_ok.py", "r1_fairscale_mappings_bug.py")]
    assert ok.status == rw.STATUS_MATCH, (ok.error, ok.details)
    assert bug.status == rw.STATUS_MISMATCH, bug.details
    assert [d.name for d in bug.details if not d.matches and d.name.startswith("grad")], bug.details
    assert all(d.matches for d in bug.details if d.name.startswith("out")), bug.details
