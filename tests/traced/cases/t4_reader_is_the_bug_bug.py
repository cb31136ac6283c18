"""The reduction written into the reader's own line (t4 twin cases).

violations: the reduction is dropped from the reader's line (marked 'the bug'); ``summed`` was bound by
the matmul that made it, so the line that bound it is no place the fault is: the reader is named.
"""
import torch
import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t)
    return t


def forward(x, w, b):
    world, rank = dist.get_world_size(), dist.get_rank()
    summed = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    out = summed + b  # the bug: the reduction was dropped from this line
    return torch.relu(out)


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
