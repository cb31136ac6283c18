"""Twin tests of repair on what a traced run shows: per bug class a buggy file and its fixed twin.

For each class the buggy file gets a fix whose patched file the traced check verifies and real
gloo ranks confirm, the fix is the twin's change, the fixed twin verifies as it is, and the
patched file matches one device on real gloo ranks (the test-only ground-truth runner, outputs
and gradients).  The classes: a custom backward that forgets its all-reduce, a forward that
forgets it, a loss averaged twice (scaling), a gather concatenated on the wrong dim.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from verify_agent.repair.commands import check_file, find_fixes

pytest.importorskip("torch")

try:
    from groundtruth.runner import run_file
except ImportError:  # imported under another rootdir/import mode
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundtruth.runner import run_file

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CASES = Path(__file__).parent / "cases"

TWINS = {
    # bug class: (buggy file, fixed twin, a line the fix must add)
    "custom backward missing all-reduce": ("tp_mlp_backward_missing_allreduce.py", "tp_mlp_fixed.py",
                                           "dist.all_reduce(grad_output)"),
    # either the Function's forward gets its all-reduce back, or its input is all-reduced before it
    "forward missing all-reduce": ("tp_mlp_forward_missing_allreduce.py", "tp_mlp_fixed.py",
                                   ("dist.all_reduce(x)", "dist.all_reduce(y)")),
    "loss averaged twice": ("dp_loss_averaged_twice.py", "dp_loss_fixed.py", "total = ReduceFromRegion.apply(partial)\n"),
    "gather on the wrong dim": ("tp_gather_wrong_dim.py", "tp_gather_fixed.py", "torch.cat(pieces, dim=-1)"),
}


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copyfile(CASES / name, target)
    return target


@pytest.mark.parametrize("bug", sorted(TWINS))
def test_fixed_twin_verifies(tmp_path, bug):
    _, fixed, _ = TWINS[bug]
    _, result = check_file(_copy(tmp_path, fixed))
    assert result.report.verdict == "verified", [d.message for d in result.report.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("bug", sorted(TWINS))
def test_buggy_file_gets_a_confirmed_fix_that_matches_one_device(tmp_path, bug):
    buggy, _, added = TWINS[bug]
    path = _copy(tmp_path, buggy)
    before = path.read_text()
    report, fixes = find_fixes(path, top_k=1)
    assert report.verdict == "violations"
    assert fixes, "no verified fix"
    fix = fixes[0]
    assert fix.report.verdict == "verified"
    assert "confirmed on 2 gloo ranks" in fix.description
    assert any(text in fix.patched for text in ((added,) if isinstance(added, str) else added))
    assert path.read_text() == before          # fix without --write leaves the file alone
    patched = tmp_path / f"patched_{buggy}"
    patched.write_text(fix.patched)
    for mode in ("forward", "grad"):
        truth = run_file(patched, world=2, mode=mode, dtype="float64")
        assert truth.matches, truth.summary()
