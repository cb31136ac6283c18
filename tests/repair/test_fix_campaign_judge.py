"""The repair campaign's judge accepts the gallery's correct files as they are.

A fix that restores a mutant's unmutated file is right by construction, so the judge must not
refute it.  The campaign judges gallery files in gradient mode (every floating input trained
unless ``example_inputs()`` writes ``requires_grad=False``); gloo's ``all_gather_into_tensor``
and ``reduce_scatter_tensor`` copy into views of their output, which raises for a trainable
input ("A view was created in no_grad mode ..."), so a forward-only file that calls one must say
so.  ``dist_colparallel_allgather_ok.py`` did not, and a fix restoring it was counted as refuted
(campaign of 2026-11-27 19:05).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from mutants import groundtruth as gt  # noqa: E402

pytestmark = pytest.mark.torch

MODELS = REPO / "examples" / "models"
VIEW_WRITING = re.compile(r"\b(all_gather_into_tensor|reduce_scatter_tensor|_all_gather_base|_reduce_scatter_base)\(")
EXPECTED = json.loads((MODELS / "expected.json").read_text())
CORRECT = sorted(name for name, info in EXPECTED.items()
                 if info["verdict"] == "verified" and VIEW_WRITING.search((MODELS / name).read_text()))


def test_some_correct_gallery_file_writes_into_views():
    assert "dist_colparallel_allgather_ok.py" in CORRECT


@pytest.mark.parametrize("name", CORRECT)
def test_the_campaigns_judge_accepts_the_correct_file(name):
    """Gradient mode, as ``benchmarks/fix_campaign.py`` asks for gallery bugs: 1 rank against 2."""
    path = MODELS / name
    truth = gt.ground_truth([gt.Request(str(path), gt.GALLERY, True, f"judge-{name}")], worlds=(2,),
                            timeout=60.0, parallel=1)[0]
    assert truth.status == gt.AGREE, truth.reason
