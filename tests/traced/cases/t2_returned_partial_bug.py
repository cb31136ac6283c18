"""Partial products reduced and handed back (t2 twin cases).

violations: ``out`` is bound to the partial product (the line marked 'the bug') and returned; the
violation names the line that bound it, not the ``return``.
"""
import torch
import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t)
    return t


def forward(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    out = partial  # the bug: the reduction was dropped here
    return out


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6)
