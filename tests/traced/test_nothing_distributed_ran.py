"""A run in which no collective or message ran on any simulated rank is not `verified`.

accelerate's ``reduce`` asks its own ``PartialState`` (set up by its launcher) how many processes
there are; on the simulated ranks it sees one and never calls ``torch.distributed``, so every rank
computes the single-device program and a proof would be about a program no launch runs.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]


def translate(*args: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", *args, "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    return run.returncode, json.loads(run.stdout)


@pytest.mark.torch
@pytest.mark.realcode
def test_a_library_that_never_saw_the_simulated_world_is_not_verified():
    pytest.importorskip("accelerate")
    code, body = translate("accelerate.utils.operations", "--entry", "reduce", "--input", "tensor=4x8")
    assert (code, body["verdict"]) == (3, "unsupported"), body["verdict"]
    assert any("no collective or message ran" in d["message"] for d in body["diagnostics"])


@pytest.mark.torch
def test_a_file_that_communicates_is_still_verified():
    code, body = translate("examples/realworld/ddp_train_step.py")
    assert (code, body["verdict"]) == (0, "verified"), [d["message"] for d in body["diagnostics"]][:3]
