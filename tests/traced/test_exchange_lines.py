"""A missing exchange of blocks is named where the exchange belongs, not at the layout op before it
(issue 24's mutated twins): twin cases, gloo ground truth (1 vs 2 ranks, each rank given its block of
tokens, its output compared with its block of heads of the single rank's), the expected line found by
the case's "# the bug" marker (the tool never reads it).

* t8: ``all_to_all_single`` into a fresh buffer replaced by ``buffer.copy_(blocks)``: named at the copy;
* t9: an all-to-all's result replaced by the un-exchanged blocks (``exchanged = stacked``): named at
  the line that bound ``exchanged``, not at the ``cat`` that laid the blocks out.
"""
from __future__ import annotations

import json
import socket

import pytest
from case_runs import CASES, marked_line, translate, warm_ranks

TWINS = ["t8_exchange_copied", "t9_exchange_rebound"]
RESHARD = ("--mesh", "tp=2", "--expect", "x=Shard(0)", "--expect", "out=Shard(1)")

_RANK = """
import json, sys, warnings, torch, torch.distributed as dist
warnings.simplefilter("ignore")
rank, world, port, cases, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
sys.path.insert(0, cases)
case = __import__(name)
torch.manual_seed(7)
(x,) = case.example_inputs()
out = case.forward(x.chunk(world, 0)[rank].contiguous())
print(json.dumps(out.double().tolist()), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


def gloo_blocks(name: str, world: int) -> list:
    """Each rank's output of ``forward`` given its block of tokens, on ``world`` plain gloo ranks."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [[str(r), str(world), str(port), str(CASES), name] for r in range(world)]
    return [json.loads(out) for out in warm_ranks(_RANK, argv, timeout=120)]


@pytest.mark.torch
@pytest.mark.parametrize("twin", TWINS)
def test_gloo_runs_back_the_twins(twin):
    torch = pytest.importorskip("torch")
    for kind, agrees in (("ok", True), ("bug", False)):
        (whole,) = gloo_blocks(f"{twin}_{kind}", 1)
        blocks = torch.tensor(whole).chunk(2, 1)
        ranks = gloo_blocks(f"{twin}_{kind}", 2)
        same = all(torch.allclose(torch.tensor(out), blocks[r]) for r, out in enumerate(ranks))
        assert same == agrees, (twin, kind)


@pytest.mark.torch
@pytest.mark.parametrize("twin", TWINS)
def test_the_right_twin_is_verified(twin):
    pytest.importorskip("torch")
    code, body = translate(f"{twin}_ok.py", *RESHARD)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


@pytest.mark.torch
@pytest.mark.parametrize("twin, step", [("t8_exchange_copied", "the copy into a buffer just allocated"),
                                        ("t9_exchange_rebound", "the line that bound exchanged")])
def test_a_missing_exchange_is_named_where_it_belongs(twin, step):
    pytest.importorskip("torch")
    code, body = translate(f"{twin}_bug.py", *RESHARD)
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert (first["line"], first["file"]) == (marked_line(CASES / f"{twin}_bug.py"), None), first
    assert "a missing exchange of blocks" in first["message"] and step in first["message"], first["message"]
