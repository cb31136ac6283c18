"""all_reduce(op=AVG) on the simulated ranks behaves as on gloo: a sum, then a division autograd sees.

Measured on gloo (torch 2.13): after ``dist.all_reduce(y, op=AVG)`` the tensor's ``grad_fn`` is a
division, so the gradient through it is scaled by 1/world (``SUM`` leaves it unscaled).  The fake
process group the tracer simulates ranks with left that division out, and a file that sums and then
averages was proven equal to one device in its backward pass while gloo's gradients differ.
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
CASE = Path(__file__).parent / "cases" / "a1_sum_then_average_scales_gradient.py"


def test_sum_then_average_is_not_verified():
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASE), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    body = json.loads(run.stdout)
    assert body["verdict"] != "verified" and run.returncode in (1, 3), body["verdict"]
