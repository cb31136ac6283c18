"""The reduction written into the reader's own line (t4 twin cases).

verified: ``reduce(summed) + b``.
"""
import torch
import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t)
    return t


def forward(x, w, b):
    world, rank = dist.get_world_size(), dist.get_rank()
    summed = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    out = reduce(summed) + b
    return torch.relu(out)


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
