"""The campaigns' ground truth sees memory nothing wrote as differing.  The ranks and the single-device
run are forked from one parent, whose allocator hands each the same stale blocks: yunchang's driver with
its ``all_gather`` dropped returned ``torch.cat`` of ``torch.empty_like`` pieces and "matched" on 1 and 2
ranks three runs in a row (the 500-mutant campaign's one violation where the numbers "agreed"; a direct
gloo run showed one device 7.2e28, the ranks 3e-23).  Fresh tensors now hold NaN in every run
(``runner.poison_uninitialized_memory``) and a NaN equals nothing."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from groundtruth import runner  # noqa: E402
from mutants import groundtruth as gt  # noqa: E402

pytestmark = pytest.mark.torch

GATHER = REPO / "examples" / "models" / "dist_colparallel_allgather_ok.py"
YUNCHANG = REPO / "examples" / "realcode_drivers" / "yunchang_ulysses_attention.py"


def _truth(tmp_path: Path, name: str, source: Path, text: str, kind: str, grad: bool) -> gt.Truth:
    path = tmp_path / name / source.name
    path.parent.mkdir()
    path.write_text(text)
    return gt.ground_truth([gt.Request(str(path), kind, grad, name)], worlds=(2,), timeout=30.0, parallel=1)[0]


def test_a_nan_differs_even_from_a_nan_at_the_same_place():
    a = np.array([1.0, math.nan])
    assert runner._diff(a, a.copy(), 1e-6, 1e-6)[0] is False
    assert runner._diff(np.array([1.0, math.inf]), np.array([1.0, math.inf]), 1e-6, 1e-6)[0] is True


def test_gathered_blocks_agree(tmp_path):
    truth = _truth(tmp_path, "ok", GATHER, GATHER.read_text(), gt.GALLERY, False)
    assert truth.status == gt.AGREE, truth.reason


def test_the_gather_buffer_returned_unfilled_differs(tmp_path):
    text = GATHER.read_text()
    assert text.count("    dist.all_gather_into_tensor(gathered, y)\n") == 1
    truth = _truth(tmp_path, "dropped", GATHER, text.replace("    dist.all_gather_into_tensor(gathered, y)\n", ""),
                   gt.GALLERY, False)
    assert truth.status == gt.DIFFER, truth.reason


@pytest.mark.realcode
def test_yunchang_driver_with_its_all_gather_dropped_differs(tmp_path):
    pytest.importorskip("yunchang")
    text = YUNCHANG.read_text()
    line = "        dist.all_gather(pieces, local.contiguous())\n"
    assert text.count(line) == 1
    truth = _truth(tmp_path, "dropped", YUNCHANG, text.replace(line, ""), gt.REALWORLD, True)
    assert truth.status == gt.DIFFER, truth.reason
