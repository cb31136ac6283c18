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


LOSS_PARALLEL = REPO / "examples" / "models" / "dtensor_loss_parallel_ok.py"


def _loss_returned_as_dtensor(tmp_path: Path) -> Path:
    text = LOSS_PARALLEL.read_text()
    assert text.count("return loss.full_tensor()") == 1
    path = tmp_path / "returned_dtensor" / LOSS_PARALLEL.name
    path.parent.mkdir()
    path.write_text(text.replace("return loss.full_tensor()", "return loss"))
    return path


def test_a_backward_torch_refuses_outside_the_codes_context_is_said_not_run_in_the_passes(tmp_path):
    # the mutation campaign's mutant of dtensor_loss_parallel_ok.py returning its DTensor loss: the
    # backward the tool adds (outside loss_parallel()) raises, as it does on one device and on every
    # gloo rank; the forward is proven and the passes line says the backward was not run and why
    # (it said "not recorded", as for code with no backward at all)
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(_loss_returned_as_dtensor(tmp_path)),
                          "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    body = json.loads(run.stdout)
    assert (run.returncode, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert body["passes"]["forward"] == "proven", body["passes"]
    assert body["passes"]["backward"].startswith("not run (the backward the tool added raised outside the code's "
                                                 "own context: RuntimeError"), body["passes"]
    assert not any("no backward pass was recorded" in d["message"] for d in body["diagnostics"])


def test_gloo_one_device_and_two_ranks_raise_alike_in_that_backward(tmp_path):
    # ground truth for the case above and for the gallery file it comes from: the outputs match on
    # 1 and 2 ranks, and the backward raises the same way on both (the campaign's `invalid`, not
    # `differ`: no rank's gradient differs from one device's, there is none on either)
    sys.path.insert(0, str(REPO / "benchmarks"))
    from mutants import groundtruth as gt

    requests = [gt.Request(str(path), gt.GALLERY, grad, f"loss-parallel-{i}")
                for i, path in enumerate((LOSS_PARALLEL, _loss_returned_as_dtensor(tmp_path))) for grad in (False, True)]
    forward_ok, grad_ok, forward_mutant, grad_mutant = gt.ground_truth(requests, worlds=(2,), timeout=30.0, parallel=2)
    assert forward_ok.status == forward_mutant.status == gt.AGREE, (forward_ok, forward_mutant)
    for truth in (grad_ok, grad_mutant):
        assert truth.status == gt.INVALID and "nll_loss_backward" in truth.reason, truth
