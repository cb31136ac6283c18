"""Writes torch does not count: a collective's result read through a view, and ``.data`` aliases.

``dist.all_reduce`` writes its tensor without bumping torch's version counter, so a view of the
reduced buffer (megatron-core's ``main_grad`` into its gradient buffer) looked current with its
value from before the collective: k6_reduced_buffer_view_bug.py was `verified` (a false verified;
gloo: 2 ranks give twice one device).  And ``w.grad.data`` is an alias torch makes through the
dispatcher and then gives a new version counter, which made the recorder refuse the read
(megatron-core's DDP gradient hook: ``param.main_grad.add_(param.grad.data)``).  A write through such
an alias (``w.data.copy_(block)``, megatron-core's CPU initialization of every weight) does not move
``w``'s own counter either: ``w`` was read as the empty tensor it was made as (k7_data_copy_ok.py was
`unsupported`, "the verifier's model disagrees with torch"; megatron-core's whole training step too);
the same memory bound later through another tensor now gives its name.  Twins k6_* and k7_*, each
backed by plain gloo runs of the file (1 rank against 2, grad mode on: the cases run backward
inside the entry).
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from case_runs import translate

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

CASES = Path(__file__).resolve().parent / "cases"
EXPECTED = {
    "k6_reduced_buffer_view_bug.py": (1, "violations"),
    "k6_reduced_buffer_view_ok.py": (0, "verified"),
    "k6_main_grad_hook_bug.py": (1, "violations"),
    "k6_main_grad_hook_ok.py": (0, "verified"),
    "k7_data_copy_bug.py": (1, "violations"),
    "k7_data_copy_ok.py": (0, "verified"),
}
RANK = """
import json, os, sys, warnings, torch, torch.distributed as dist
warnings.simplefilter("ignore")
rank, world, port, cases, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
sys.path.insert(0, cases)
case = __import__(name)
torch.manual_seed(7)
out = case.forward(*case.example_inputs())
print(json.dumps(out.detach().double().tolist()))
"""


def _gloo(name: str, world: int) -> list[np.ndarray]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(world), str(port), str(CASES), name[:-3]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    outputs = []
    for process in ranks:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-2000:]
        outputs.append(np.array(json.loads(out)))
    return outputs


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_tool_gives_the_stated_verdict(name):
    code, body = translate(name, timeout=900)
    errors = [d["message"] for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == EXPECTED[name], errors
    if code == 1:
        assert "output 0 differs" in errors[0] and "reproduced by torch" in errors[0], errors


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gloo_backs_the_stated_verdict(name):
    [one] = _gloo(name, 1)
    agree = all(np.allclose(one, rank, rtol=1e-6, atol=1e-8) for rank in _gloo(name, 2))
    assert agree == (EXPECTED[name][1] == "verified")
