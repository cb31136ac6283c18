"""Ring all-gather with blocking point-to-point ops where every rank receives first.

Twin of dist_ring_allgather_ok.py with a blocking recv before a blocking send.

Bug: deadlock: every rank waits in recv for its predecessor, which is itself waiting
in recv; no send is ever posted.  (On one rank the loop is empty, so the reference runs.)

Expected: violations
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN, OUT = 8, 16, 16


def example_inputs():
    return torch.randn(ROWS, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    blocks = [torch.zeros(ROWS // world, OUT) for _ in range(world)]
    blocks[rank] = x.chunk(world, dim=0)[rank] @ w
    for step in range(world - 1):
        dist.recv(blocks[(rank - step - 1) % world], src=prev)
        dist.send(blocks[(rank - step) % world], dst=nxt)
    return torch.cat(blocks, dim=0)
