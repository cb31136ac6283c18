"""A real-world mutant that raises on 1 rank as on N is broken code, not a distributed bug.

The real-world runner copies the 1-rank reference's parameter values into the N-rank modules.
When the reference raised it has no values, and the N-rank run raised "parameter fc1.weight does
not exist in the 1-rank reference" before running the driver: the ground truth then read
"1 rank fails, 2 ranks fail otherwise" as ``differ`` and the repair campaign counted the mutant
as a bug to fix (megatron_swiglu_mlp.py with ``chunk(fused, 2, dim=-2)``: a matmul shape error on
one device and on every rank; no fix can make it equal a single device that raises).  Now the
ranks keep their own seeded values and the runs' exceptions are compared: ``invalid``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("megatron.core")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from mutants import groundtruth as gt  # noqa: E402

pytestmark = pytest.mark.torch

DRIVER = REPO / "examples" / "realcode_drivers" / "megatron_swiglu_mlp.py"
SPLIT = "gate, up = torch.chunk(fused, 2, dim=-1)"


def _truths(tmp_path: Path) -> list[gt.Truth]:
    text = DRIVER.read_text()
    assert text.count(SPLIT) == 1
    broken = tmp_path / "broken" / DRIVER.name
    broken.parent.mkdir()
    broken.write_text(text.replace(SPLIT, SPLIT.replace("dim=-1", "dim=-2")))
    requests = [gt.Request(str(DRIVER), gt.REALWORLD, True, "reference-raises-correct"),
                gt.Request(str(broken), gt.REALWORLD, True, "reference-raises-broken")]
    return gt.ground_truth(requests, worlds=(2,), timeout=60.0, parallel=2)


def test_a_mutant_raising_on_one_rank_and_on_two_is_invalid_and_its_driver_agrees(tmp_path):
    correct, broken = _truths(tmp_path)
    assert correct.status == gt.AGREE, correct.reason
    assert broken.status == gt.INVALID, broken.reason
    assert "mat1 and mat2 shapes cannot be multiplied" in broken.reason
