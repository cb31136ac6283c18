"""Pattern 11: `return` inside a branch on the rank.

Rank 0 returns the broadcast value as is, the others a copy of it: every rank returns y.

Expected: verified
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 4, 6


def example_inputs():
    return torch.randn(ROWS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x @ w
    dist.broadcast(y, src=0)
    if rank == 0:
        return y
    return y * 1.0
