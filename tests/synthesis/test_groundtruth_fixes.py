"""Patched gallery files compute, on 2 real gloo ranks, the numbers of the same file on 1 rank."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from frontends import translate_source
from verifier.check import check_program
from verify_agent.repair import source_fixes

from .support import MODELS

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

try:
    from groundtruth import runner as gt
except ImportError:  # imported under another rootdir/import mode
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundtruth import runner as gt

FILES = ("dist_tp_mlp_missing_allreduce.py", "dist_tp_mlp_double_allreduce.py", "dist_rowparallel_allreduce_max.py",
         "dist_rowparallel_gelu_on_partial.py", "megatron_mappings_silu_on_partial.py",
         "dtensor_from_local_partial_declared_replicate.py")


def _patched(name: str, directory: Path) -> Path | None:
    path = MODELS / name
    source = path.read_text()
    translation = translate_source(source, str(path))
    if translation.program is None:
        return None
    report = check_program(translation.program, str(path))
    fixes = source_fixes(source, str(path), translation, report, top_k=1)
    if not fixes:
        return None
    target = directory / name
    target.write_text(fixes[0].patched)
    return target


def test_patched_files_match_the_single_rank_run(tmp_path):
    patched = [p for p in (_patched(name, tmp_path) for name in FILES) if p is not None]
    assert patched
    jobs = [gt.Job(gt.JobSpec(str(p), timeout=30.0), world=2) for p in patched]
    results = gt.run_jobs(jobs)
    assert [r.summary() for r in results if r.status != gt.STATUS_MATCH] == []
