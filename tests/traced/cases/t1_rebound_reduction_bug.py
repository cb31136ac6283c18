"""A row-parallel layer written by hand: partial products all-reduced, then a bias (t1 twin cases).

violations: ``summed`` is bound to the partial product (the line marked 'the bug'); the values first go
wrong at the bias add below, which reads it; the violation names the line that bound it.
"""
import torch
import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t)
    return t


def forward(x, w, b):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    summed = partial  # the bug: the reduction was dropped here
    out = summed + b
    return torch.relu(out)


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
