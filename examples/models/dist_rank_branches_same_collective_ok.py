"""Row-parallel projection whose all-reduce is written once in each branch of `if rank == 0`.

Both branches issue the same collective, so every rank of the group takes part in one
all-reduce even though it stands on two different lines; each branch then doubles the sum
its own way.

Expected: verified
"""
import torch
import torch.distributed as dist

N, D = 4, 8


def example_inputs():
    return torch.randn(N, D), torch.randn(D, D)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    if rank == 0:
        dist.all_reduce(y)
        z = y * 2
    else:
        dist.all_reduce(y)
        z = y + y
    return z
