"""The campaigns' ground truth trains what a file's inputs state, as the tool does: inputs that
``example_inputs()`` writes ``requires_grad=False`` for stay untrained in gradient mode.  Before, the
gallery runner trained every floating input, so a correct forward-only file (a plain
``dist.all_reduce``, which carries no gradient) "differed" and its mutants counted as bugs (the repair
campaign once counted a correct fix of one as refuted)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from mutants import groundtruth as gt  # noqa: E402

pytestmark = pytest.mark.torch

CORRECT = REPO / "examples" / "models" / "dist_dp_mean_loss_ok.py"
STATED = "requires_grad=False"


def _truth(tmp_path: Path, name: str, text: str) -> gt.Truth:
    path = tmp_path / name / CORRECT.name
    path.parent.mkdir()
    path.write_text(text)
    request = gt.Request(str(path), gt.GALLERY, True, name)
    return gt.ground_truth([request], worlds=(2,), timeout=20.0, parallel=1)[0]


def test_forward_only_file_agrees_in_gradient_mode(tmp_path):
    truth = _truth(tmp_path, "ok", CORRECT.read_text())
    assert truth.status == gt.AGREE, truth.reason


def test_its_mutant_without_the_average_differs(tmp_path):
    text = CORRECT.read_text()
    assert text.count("return loss / world") == 1
    truth = _truth(tmp_path, "mutant", text.replace("return loss / world", "return loss"))
    assert truth.status == gt.DIFFER and truth.reason.startswith("forward"), truth.reason


def test_inputs_not_stated_untrained_are_still_trained(tmp_path):
    """The same file without its statement: the plain all-reduce leaves the input gradients unreduced."""
    text = CORRECT.read_text()
    assert text.count(STATED) == 3
    truth = _truth(tmp_path, "trained", text.replace(", " + STATED, ""))
    assert truth.status == gt.DIFFER and truth.reason.startswith("grad"), truth.reason
