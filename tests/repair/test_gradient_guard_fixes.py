"""Twins of three repairs the fix campaign missed (issue 29), each buggy file repaired, confirmed
and judged on real gloo ranks against one device (1 vs 2 and 4, outputs and gradients in float64):

* a data-parallel loss summed with ``dist.all_reduce`` (no backward): the forward is right, but the
  weight's gradient is each rank's own rows'.  The run names the input (``gradient of w``) and the
  line; ``guard_input`` wraps its read there in an identity-forward / all-reduce-backward Function;
* a mean loss summed over the ranks by an in-place ``dist.all_reduce(loss)`` and never divided (its
  twin is ``examples/models/dist_dp_mean_loss_ok.py``): the run names the all-reduce's line, which
  assigns nothing; ``add_scaling`` divides the name it reduces after it;
* an input copied into the tensor-parallel region twice (``Copy.apply(Copy.apply(x))``): the run goes
  wrong inside the Function's backward, so the line calling it twice is among the lines tried
  (``communicating_lines``) and ``unwrap_twice`` applies it once.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from verify_agent.repair.commands import find_fixes

pytest.importorskip("torch")

try:
    from groundtruth.runner import Job, JobSpec, run_jobs
except ImportError:  # imported under another rootdir/import mode
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundtruth.runner import Job, JobSpec, run_jobs

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CASES = Path(__file__).parent / "cases"


def _gloo(runs: list[tuple[Path, int]], mode: str = "grad") -> list[bool]:
    """Whether each file matches one device on that many gloo ranks (outputs and gradients, float64;
    outputs only in ``forward`` mode); one batch, so the reference and each world size share their
    worker processes."""
    jobs = [Job(JobSpec(str(path.resolve()), mode), world) for path, world in runs]
    return [result.matches for result in run_jobs(jobs)]


def _repaired(tmp_path: Path, buggy: str, written: str, twin: str | Path | None = None, mode: str = "grad") -> None:
    path = tmp_path / buggy
    shutil.copyfile(CASES / buggy, path)
    report, fixes = find_fixes(path, top_k=1)
    assert report.verdict == "violations"
    assert fixes, "no verified fix"
    fix = fixes[0]
    assert fix.report.verdict == "verified"
    assert "confirmed on 2 and 4 gloo ranks" in fix.description
    assert written in fix.patched, fix.description
    patched = tmp_path / f"patched_{buggy}"
    patched.write_text(fix.patched)
    runs = [(path, 2), (patched, 2), (patched, 4)]
    if twin is not None:
        copy = tmp_path / Path(twin).name
        shutil.copyfile(twin if isinstance(twin, Path) else CASES / twin, copy)
        runs.append((copy, 2))
    # the bug differs from one device on real ranks; the patched file (and the twin) match it
    assert _gloo(runs, mode) == [False] + [True] * (len(runs) - 1)


def test_loss_all_reduced_without_backward_gets_the_weight_guarded(tmp_path):
    _repaired(tmp_path, "dp_loss_plain_allreduce_grad_local.py",
              "err = x.chunk(world, dim=0)[rank] @ _CopyToRanks.apply(w)\n", twin="dp_loss_plain_allreduce_grad_summed.py")


def test_input_copied_twice_is_copied_once(tmp_path):
    # its twin, with the copy applied once, is tp_mlp_fixed.py (test_traced_fix_twins.py)
    _repaired(tmp_path, "tp_mlp_copied_twice.py", "    x = CopyToRegion.apply(x)\n")


def test_mean_summed_in_place_is_divided_after_its_all_reduce(tmp_path):
    twin = Path(__file__).resolve().parents[2] / "examples" / "models" / "dist_dp_mean_loss_ok.py"
    _repaired(tmp_path, "dp_mean_loss_summed.py", "    dist.all_reduce(loss)\n    loss = loss / dist.get_world_size()\n",
              twin=twin, mode="forward")   # its inputs are stated not trainable: outputs only
