"""Pattern 11 (buggy twin): the ranks other than 0 return twice the broadcast value.

Expected: violations at line 21 (the second return)
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
    return y * 2.0
