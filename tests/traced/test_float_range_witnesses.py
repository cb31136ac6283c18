"""Log-sum-exp by any shift, and witnesses that differ only by a float overflow.

The proof is about real numbers.  A log-sum-exp whose shift is the global maximum divided by the
world size is equal to the single-device one in real arithmetic (any shift cancels): it is
proven (``log(e^L T) = L + log T``).  Where such a proof does not go through (the vocab-parallel
cross entropy with label smoothing, its max shift divided by the world size), the solver can
choose logits so large that a rank's ``exp`` overflows where the single device's does not: that
is a numerics note and the verdict stays open (exit 3), never a violation.  A real difference
(each rank shifting by its own maximum) is still one.  Ground truth: gloo runs on 1 against 2
and 4 ranks (tests/groundtruth) agree and differ respectively.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """
    import torch
    import torch.distributed as dist


    def forward(x):
        world, rank = dist.get_world_size(), dist.get_rank()
        local = x.chunk(world, dim=-1)[rank]
        shift = local.max(dim=-1).values
        {reduce_shift}
        shift = shift / world
        total = (local - shift.unsqueeze(-1)).exp().sum(dim=-1)
        dist.all_reduce(total)
        return total.log() + shift


    def example_inputs():  # forward-only code (raw all_reduce): the logits' gradient is not the point
        return (torch.randn(4, 8, requires_grad=False),)
"""
GLOBAL_SHIFT = "dist.all_reduce(shift, op=dist.ReduceOp.MAX)"
LOCAL_SHIFT = "pass"


def write(tmp_path: Path, reduce_shift: str) -> Path:
    path = tmp_path / "lse.py"
    path.write_text(textwrap.dedent(PROGRAM).format(reduce_shift=reduce_shift))
    return path


def translate(path: Path) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=240)
    return run.returncode, json.loads(run.stdout)


def test_a_log_sum_exp_shifted_by_max_over_world_is_proven(tmp_path):
    code, report = translate(write(tmp_path, GLOBAL_SHIFT))
    assert (code, report["verdict"]) == (0, "verified"), report["diagnostics"]


def cross_entropy_shifted_by_max_over_world(folder: Path) -> Path:
    driver = (REPO / "examples" / "realworld" / "vocab_parallel_cross_entropy_label_smoothing.py").read_text()
    reduce_max = "    dist.all_reduce(logits_max, op=dist.ReduceOp.MAX)\n"
    assert reduce_max in driver
    path = folder / "ce.py"
    path.write_text(driver.replace(reduce_max, reduce_max + "    logits_max = logits_max / dist.get_world_size()\n"))
    return path


def test_an_overflow_only_witness_is_a_note_not_a_violation(tmp_path):
    code, report = translate(cross_entropy_shifted_by_max_over_world(tmp_path))
    assert report["verdict"] != "violations" and code != 1, report["diagnostics"]
    notes = [d["message"] for d in report["diagnostics"] if d["check"] == "numerics"]
    assert report["verdict"] == "verified" or (code == 3 and notes), report["diagnostics"]


def test_each_rank_shifting_by_its_own_maximum_is_a_violation(tmp_path):
    code, report = translate(write(tmp_path, LOCAL_SHIFT))
    assert (code, report["verdict"]) == (1, "violations"), report["diagnostics"]


def test_ground_truth_agrees_with_the_global_shift_and_not_the_local_one(tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth.realworld_runner import STATUS_MATCH, STATUS_MISMATCH, Job, Spec, run_jobs
    wanted = {}   # file -> the status its 2- and 4-rank runs must have
    for folder, reduce_shift, want in (("global", GLOBAL_SHIFT, STATUS_MATCH), ("local", LOCAL_SHIFT, STATUS_MISMATCH)):
        (tmp_path / folder).mkdir()
        wanted[str(write(tmp_path / folder, reduce_shift).resolve())] = want
    (tmp_path / "ce").mkdir()
    wanted[str(cross_entropy_shifted_by_max_over_world(tmp_path / "ce").resolve())] = STATUS_MATCH
    # one batch: the 1-rank references and each world size share their worker processes
    jobs = [Job(Spec(path), world) for path in wanted for world in (2, 4)]
    results = run_jobs(jobs)
    assert len(results) == 6
    for job, result in zip(jobs, results):
        assert result.status == wanted[job.spec.path], (job.spec.path, job.world, result)


def test_a_float_infinity_the_encoding_cannot_hold_is_unsupported_not_an_internal_error(tmp_path):
    """A mutant of the ring-attention driver (the running sum made one dim too big) multiplies a
    -inf-derived constant into a product; gloo ranks agree with one device.  Z3 cannot build that
    numeral: the check says unsupported with the line, never exit 4."""
    driver = (REPO / "examples" / "realworld" / "ring_attention_online_softmax.py").read_text()
    line = "    l = torch.zeros(q.shape[:-1])\n"
    assert line in driver
    path = tmp_path / "ring.py"
    path.write_text(driver.replace(line, "    l = torch.zeros(q.shape[:(-1) + 1])\n"))
    code, report = translate(path)
    assert code in (0, 3) and report["verdict"] in ("verified", "unsupported"), report["diagnostics"]
