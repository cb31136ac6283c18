"""Two row-parallel projections whose partial sums are all-reduced in the same order on every rank.

Expected: verified
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 8, 16, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT), torch.randn(HIDDEN, OUT)


def forward(x, w_a, w_b):
    rank, world = dist.get_rank(), dist.get_world_size()
    x_local = x.chunk(world, dim=1)[rank]
    a = x_local @ w_a.chunk(world, dim=0)[rank]
    b = x_local @ w_b.chunk(world, dim=0)[rank]
    dist.all_reduce(a)
    dist.all_reduce(b)
    return a, b
