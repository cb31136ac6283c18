"""A run in which no collective or message ran on any simulated rank is not `verified`.

Code that asks its own launcher state how many processes there are (accelerate's ``PartialState``
before it was set up on the simulated world) sees one and never calls ``torch.distributed``: every
rank computes the single-device program and a proof would be about a program no launch runs.
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
def test_code_that_never_saw_the_simulated_world_is_not_verified():
    code, body = translate(str(Path(__file__).parent / "cases" / "n1_own_launcher_state.py"))
    assert (code, body["verdict"]) == (3, "unsupported"), body["verdict"]
    assert any("no collective or message ran" in d["message"] for d in body["diagnostics"])


@pytest.mark.torch
@pytest.mark.realcode
def test_accelerate_state_is_set_up_as_its_launcher_would():
    # accelerate's reduce of a tensor every rank holds whole sums it over the ranks: gloo (1 vs 2 and 4
    # ranks, benchmarks/realcode.py) says the outputs differ; with its PartialState set up it is checked
    pytest.importorskip("accelerate")
    code, body = translate("accelerate.utils.operations", "--entry", "reduce", "--input", "tensor=4x8",
                           "--arg", "reduction='sum'")
    assert (code, body["verdict"]) == (1, "violations"), body["verdict"]
    assert any("PartialState" in d["message"] for d in body["diagnostics"])


@pytest.mark.torch
def test_a_file_that_communicates_is_still_verified():
    code, body = translate("examples/realworld/ddp_train_step.py")
    assert (code, body["verdict"]) == (0, "verified"), [d["message"] for d in body["diagnostics"]][:3]
