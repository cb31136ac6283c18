"""A row-parallel layer written by hand: partial products all-reduced, then a bias (t1 twin cases).

verified: the reduction runs where ``summed`` is bound.
"""
import torch
import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t)
    return t


def forward(x, w, b):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    summed = reduce(partial)
    out = summed + b
    return torch.relu(out)


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
