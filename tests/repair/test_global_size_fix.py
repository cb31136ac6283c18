"""A mean over a sharded dim divided by the rank's own share of it gets the whole size.

``total / part`` with ``part = local.size(-1)`` after the sum is all-reduced: right on one rank,
``world`` times too large on more (examples/realworld/vocab_parallel_cross_entropy_smoothing_local_size.py
has it inside a label-smoothed loss).  The case returns the sum as well, so neither dividing the
returned value nor the reduced sum by the world size is a fix; ``global_size`` writes
``total / (part * dist.get_world_size())``.  The twin divides by ``part * world`` and verifies.
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


def test_local_size_divisor_gets_the_whole_size_and_matches_one_device(tmp_path):
    path = tmp_path / "vocab_mean_local_size.py"
    shutil.copyfile(CASES / path.name, path)
    report, fixes = find_fixes(path, top_k=1)
    assert report.verdict == "violations"
    assert fixes, "no verified fix"
    assert fixes[0].report.verdict == "verified"
    assert "confirmed on 2 and 4 gloo ranks" in fixes[0].description
    assert "    return total, total / (part * dist.get_world_size())\n" in fixes[0].patched
    patched = tmp_path / "patched.py"
    patched.write_text(fixes[0].patched)
    for world in (2, 4):
        truth = run_file(patched, world=world, mode="forward", dtype="float64")
        assert truth.matches, truth.summary()


def test_whole_size_twin_verifies(tmp_path):
    path = tmp_path / "vocab_mean_whole_size.py"
    shutil.copyfile(CASES / path.name, path)
    _, result = check_file(path)
    assert result.report.verdict == "verified", [d.message for d in result.report.diagnostics if d.severity == "error"]
