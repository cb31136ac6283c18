"""Ring all-gather written with point-to-point ops, its receive lost.

Each rank projects its block of rows, then in world-1 steps should pass one block to the next
rank (isend) while receiving one from the previous rank (recv); the recv was lost, so every send goes unreceived and the blocks of the other ranks stay zero.  The verified twin is
examples/models/dist_ring_allgather_ok.py.

Expected: violations
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN, OUT = 8, 16, 16


def example_inputs():
    return torch.randn(ROWS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, OUT, requires_grad=False)  # forward only


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    blocks = [torch.zeros(ROWS // world, OUT) for _ in range(world)]
    blocks[rank] = x.chunk(world, dim=0)[rank] @ w
    for step in range(world - 1):
        send_req = dist.isend(blocks[(rank - step) % world], dst=nxt)
        send_req.wait()
    return torch.cat(blocks, dim=0)
