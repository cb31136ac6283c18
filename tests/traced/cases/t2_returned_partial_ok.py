"""Partial products reduced and handed back (t2 twin cases).

verified: the reduction runs where ``out`` is bound.
"""
import torch
import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t)
    return t


def forward(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    out = reduce(partial)
    return out


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6)
