"""A trainable input each rank reads only a disjoint block of (a sequence-sharded input).

Each rank's gradient is zero outside its block, so the gradient the ranks hold together is the
sum of theirs (what the gloo ground truth compares: tests/trust/test_groundtruth.py, cases p13);
the tool compares each rank's block.  Run as a user runs it: the CLI in a subprocess, in the
text format (which renders the passes) and in JSON.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "trust" / "cases"


def translate(name: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=240)


def test_blocks_of_a_sequence_sharded_input_gradient_verify_and_the_text_report_lists_the_passes():
    run = translate("p13_sequence_sharded_input_grad_ok.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "passes: forward proven; backward proven; temporal proven" in run.stdout
    assert "each rank reads only its own disjoint block of x" in run.stdout


def test_a_backward_that_scales_the_rank_block_is_found_at_its_line():
    run = translate("p13_sequence_sharded_input_grad_bug.py", "--format", "json")
    assert run.returncode == 1, run.stdout + run.stderr
    body = json.loads(run.stdout)
    (error,) = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert error["line"] == 22 and error["message"].startswith("gradient of x differs")
    assert body["passes"]["backward"] == "violated"
