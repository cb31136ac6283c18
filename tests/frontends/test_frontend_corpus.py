"""Every sample case and gallery file gets the verdict of its expected.json.

Correct programs must verify (a false alarm is a failure); buggy ones must be reported as
violations.  Files the deterministic frontend knowingly cannot read are pinned to the
unsupported construct and its line.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from frontends import translate_source
from verifier.check import check_program

HERE = Path(__file__).parent
GALLERY = HERE.parents[1] / "examples" / "models"
CASES = HERE / "cases"

# The verifier runs these long enough to leave them out of the fast suite (see test_slow_gallery_file_verifies).
SLOW = {"dist_vocab_parallel_softmax_ok.py"}

# Files whose structure depends on the world size: a Python list with one tensor per rank, written at
# rank-dependent positions inside a loop of world-1 steps.  The IR states one program for every mesh
# size, so the frontend reports them (the LLM path may take them over).
UNSUPPORTED_LINES = {
    "dist_ring_allgather_ok.py": 23,
    "dist_p2p_both_recv_first_deadlock.py": 24,
}


def _corpus() -> list:
    params = []
    for directory in (CASES, GALLERY):
        expected_file = directory / "expected.json"
        if not expected_file.exists():
            continue
        expected = json.loads(expected_file.read_text())
        for path in sorted(directory.glob("*.py")):
            if path.name not in expected:
                continue
            params.append(pytest.param(path, expected[path.name]["verdict"], id=path.name))
    return params


CORPUS = _corpus()


@pytest.mark.parametrize("path, verdict", [p for p in CORPUS if p.id not in SLOW | set(UNSUPPORTED_LINES)])
def test_file_gets_its_expected_verdict(path: Path, verdict: str):
    translation = translate_source(path.read_text(), str(path))
    assert translation.unsupported == [], translation.unsupported
    report = check_program(translation.program, str(path))
    assert report.verdict == verdict, [(d.check, d.line, d.message) for d in report.diagnostics]
    if verdict == "violations":
        assert any(d.line is not None for d in report.diagnostics if d.severity == "error")


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_LINES))
def test_world_sized_rank_indexed_list_is_reported_unsupported_at_its_line(name: str):
    path = GALLERY / name
    if not path.exists():
        pytest.skip(f"{name} is not in the gallery")
    translation = translate_source(path.read_text(), str(path))
    assert translation.program is None
    assert [item.line for item in translation.unsupported] == [UNSUPPORTED_LINES[name]]
    assert "world size" in translation.unsupported[0].reason


@pytest.mark.parametrize("name", sorted(SLOW))
def test_slow_gallery_file_translates_completely(name: str):
    path = GALLERY / name
    if not path.exists():
        pytest.skip(f"{name} is not in the gallery")
    translation = translate_source(path.read_text(), str(path))
    assert translation.complete


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("VERIFY_AGENT_SLOW_TESTS"), reason="minutes of solver time; set "
                                                                         "VERIFY_AGENT_SLOW_TESTS=1 to run")
@pytest.mark.parametrize("path, verdict", [p for p in CORPUS if p.id in SLOW])
def test_slow_gallery_file_verifies(path: Path, verdict: str):
    translation = translate_source(path.read_text(), str(path))
    assert check_program(translation.program, str(path)).verdict == verdict
