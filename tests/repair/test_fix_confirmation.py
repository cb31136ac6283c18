"""Twin tests of a fix's confirmation on real ranks: a candidate real ranks refute is refuted, its
twin is confirmed on 2 and 4 gloo ranks.

The refuted candidate is the campaign's refuted fix: a row-parallel layer whose all-reduce op was
changed to AVG, "repaired" by a SUM all-reduce before the AVG one.  The forward is right (the sum,
then its average over equal values), but gloo's AVG divides by the world with an op autograd
records, so every input gradient is divided by the number of ranks.  The confirmation used to run
the code under a ``TorchDispatchMode`` (to give random draws their values), below which that
division leaves the autograd graph: it agreed with one device where the plain code does not.
"""
from __future__ import annotations

from pathlib import Path
import shutil

import pytest

pytest.importorskip("torch")

from verify_agent.repair.traced_fixes import (TracedSettings, check_candidate, confirm_fix,  # noqa: E402
                                              confirmed_worlds, overlay_root)

pytestmark = [pytest.mark.torch, pytest.mark.slow]

HEAD = '''import torch
import torch.distributed as dist


def example_inputs():
    return torch.randn(8, 32), torch.randn(32, 16)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
'''
SUM_BEFORE_AVG = HEAD + "    dist.all_reduce(y)\n    dist.all_reduce(y, op=dist.ReduceOp.AVG)\n    return y\n"
SUM = HEAD + "    dist.all_reduce(y, op=dist.ReduceOp.SUM)\n    return y\n"


def _confirm(tmp_path: Path, text: str):
    path = tmp_path / "rowparallel.py"
    path.write_text(text)
    checked, copy = check_candidate(text, str(path), TracedSettings(), timeout=120.0)
    try:
        assert checked.program is not None, "the candidate did not run"
        return checked, confirm_fix(checked, copy, str(path))
    finally:
        shutil.rmtree(overlay_root(copy), ignore_errors=True)


def test_sum_before_an_averaging_all_reduce_is_refuted_by_real_ranks(tmp_path):
    _, (outcome, detail) = _confirm(tmp_path, SUM_BEFORE_AVG)
    assert outcome == "reproduced", detail


def test_the_summing_twin_is_confirmed_on_2_and_4_ranks(tmp_path):
    checked, (outcome, detail) = _confirm(tmp_path, SUM)
    assert outcome == "agrees", detail
    assert confirmed_worlds(checked) == "2 and 4"
    assert "on 2 gloo ranks" in detail and "on 4 gloo ranks" in detail
