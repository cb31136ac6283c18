"""Warm runs (``translate DIR``) are isolated like cold ones: a file run by the fork server holds no
capabilities, cannot read the server's memory, and cannot stop the server the next file runs in.

Each probe raises (an input error at its line) when it gets what it must not; the file is verified
when every probe was refused.  The file after it must run in the same server (no restart) when the
server is its namespace's first process, which the kernel protects from signals sent inside it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]

ROW_PARALLEL = '''\
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 4, 8, 4


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y
'''

PROBES = '''\
import os
import signal

with open("/proc/self/status", encoding="utf-8") as status:
    effective = [line.split()[1] for line in status if line.startswith("CapEff:")][0]
if int(effective, 16) != 0:
    raise ValueError(f"the run holds capabilities {effective}")
try:
    with open(f"/proc/{os.getppid()}/mem", "rb") as memory:
        memory.read(1)
except OSError:
    pass
else:
    raise ValueError("the run read the server's memory")
if os.getppid() == 1:   # the server is its PID namespace's first process: the kernel ignores this
    os.kill(1, signal.SIGKILL)
'''


def test_a_warm_run_holds_no_capabilities_cannot_read_the_server_and_the_next_file_still_runs(tmp_path):
    from frontends.sandbox import isolation

    (tmp_path / "a_probes.py").write_text(PROBES + ROW_PARALLEL, encoding="utf-8")
    (tmp_path / "b_next.py").write_text(ROW_PARALLEL, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", "from verify_agent.cli import main; main()", "translate",
                           str(tmp_path), "--format", "json", "--timeout", "120"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=600)
    files = {Path(body["file"]).name: body for body in json.loads(proc.stdout)["files"]}
    assert files["a_probes.py"]["verdict"] == "verified", files["a_probes.py"]["diagnostics"]
    assert files["b_next.py"]["verdict"] == "verified"
    if isolation() == "namespaces":   # the server is PID 1 of its namespace: SIGKILL from inside is ignored
        assert files["a_probes.py"]["stats"]["server_start"] is True
        assert files["b_next.py"]["stats"]["server_start"] is False
