"""A router reading values an all-reduce computed gets a verdict (frontends/traced/replay.py).

Each case all-reduces a row-parallel projection, picks rows with ``topk`` and branches on ``.item()``
of the reduced values, as mixture-of-experts routers do.  Simulated ranks alone cannot follow that read
(unsupported before); with the values real gloo ranks computed, the correct case is verified and the
case whose all-reduce takes the maximum is a violation at the all-reduce line.  Ground truth: the
cases themselves on 1 and 2 gloo ranks (below).  Each translate runs the file several times (simulated,
real ranks, simulated again): marked slow.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from case_runs import warm_ranks

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.slow]

CASES = Path(__file__).resolve().parent / "cases"

GLOO = """
import os, sys, torch, torch.distributed as dist
rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0) if world > 1 else dist.HashStore()
dist.init_process_group("gloo", rank=rank, world_size=world, store=store)
sys.path.insert(0, {cases!r})
import {name} as case
torch.manual_seed(0)
print(case.forward(*case.example_inputs()).flatten().tolist())
"""


def _gloo(name: str, world: int) -> list:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = GLOO.format(cases=str(CASES), name=name)
    outputs = warm_ranks(script, [[str(r), str(world), str(port)] for r in range(world)])
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


def _translate(name: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / f"{name}.py"),
                           "--format", "json", "--timeout", "900"], capture_output=True, text=True, timeout=1000)
    return json.loads(done.stdout)


@pytest.mark.parametrize("name, verdict", [("router_reads_reduced_ok", "verified"),
                                           ("router_reads_reduced_bug", "violations")])
def test_a_router_reading_reduced_values_gets_the_verdict_gloo_gives(name, verdict):
    import numpy as np

    (one,), two = _gloo(name, 1), _gloo(name, 2)
    agree = all(len(r) == len(one) and np.allclose(r, one) for r in two)
    assert agree == (verdict == "verified")           # the ground truth the verdict must match
    body = _translate(name)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert body["verdict"] == verdict, errors
    assert any("real gloo ranks computed" in d["message"] for d in body["diagnostics"])
    if verdict == "violations":
        assert errors[0]["line"] == 18 and "all_reduce" in errors[0]["message"]
