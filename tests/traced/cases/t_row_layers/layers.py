"""A row-parallel layer of the user's own package (t5 cases)."""
import torch
import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t)
    return t


def row_linear(x, w, b):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    summed = reduce(partial)
    return summed + b


def row_linear_dropped(x, w, b):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, 1)[rank] @ w.chunk(world, 0)[rank]
    summed = partial  # the bug: the reduction was dropped here
    return summed + b
