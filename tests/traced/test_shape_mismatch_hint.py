"""A rank output of another shape says which reshard it looks like, and the hint it gives works.

fairscale's gather_from_model_parallel_region gathers a rank's block: given the whole input on every
rank (as a harness does), each rank returns world times the value; stated as a block input, it is
checked as the reshard it is (verified; on gloo, gathering the blocks gives back the input).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("fairscale")

pytestmark = [pytest.mark.torch, pytest.mark.realcode]

REPO = Path(__file__).resolve().parents[2]
MODULE = "fairscale.nn.model_parallel.mappings"


def translate(*args: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", MODULE, *args, "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    return run.returncode, json.loads(run.stdout)


def test_a_gather_given_the_whole_input_says_so_and_the_stated_block_verifies():
    code, body = translate("--entry", "gather_from_model_parallel_region")
    assert code == 1
    said = " ".join(d["message"] for d in body["diagnostics"] if d["severity"] == "error")
    assert "2 times the value along dim 2" in said and "--expect NAME=Shard(2)" in said, said
    code, body = translate("--entry", "gather_from_model_parallel_region", "--expect", "input_=Shard(2)")
    assert (code, body["verdict"]) == (0, "verified")


def test_a_scatter_says_its_piece_and_out_shard_verifies():
    code, body = translate("--entry", "scatter_to_model_parallel_region")
    said = " ".join(d["message"] for d in body["diagnostics"] if d["severity"] == "error")
    assert code == 1 and "--expect out=Shard(2)" in said, said
    code, body = translate("--entry", "scatter_to_model_parallel_region", "--expect", "out=Shard(2)")
    assert (code, body["verdict"]) == (0, "verified")
