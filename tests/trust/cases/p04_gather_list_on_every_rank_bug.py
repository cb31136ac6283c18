"""Pattern 4 (buggy twin): the gather list is allocated and passed on every rank.

torch raises ValueError on the non-destination ranks ("Argument ``gather_list`` must NOT
be specified on non-destination ranks").

Expected: input error at the gather line
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 8, 6


def example_inputs():
    return (torch.randn(ROWS, HIDDEN),)


def forward(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = x.chunk(world, dim=0)[rank] * 2.0
    buffers = [torch.empty_like(mine) for _ in range(world)]
    dist.gather(mine, buffers, dst=0)
    full = torch.cat(buffers, dim=0)
    dist.broadcast(full, src=0)
    return full
