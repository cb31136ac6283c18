"""Ring all-gather written with point-to-point ops, its send lost.

Each rank projects its block of rows, then in world-1 steps should pass one block to the next
rank (isend) while receiving one from the previous rank (recv); the isend was lost, so every recv waits for a message no rank sends.  The verified twin is
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
        dist.recv(blocks[(rank - step - 1) % world], src=prev)
    return torch.cat(blocks, dim=0)
