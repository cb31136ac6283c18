"""Rows split over the ranks, scaled, gathered back (s2 twin cases).

violations: the gathered pieces are concatenated along the columns (the line marked 'the bug'); the
rank returns a (4, 8) value where one device returns (8, 4), and the violation names the line where
the shape stopped being a block of the single device's value, not the return.
"""
import torch
import torch.distributed as dist


def forward(x):
    world, rank = dist.get_world_size(), dist.get_rank()
    local = torch.chunk(x, world, dim=0)[rank] * 2.0
    pieces = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(pieces, local)
    out = torch.cat(pieces, dim=1)  # the bug: the pieces are rows, concatenated as columns
    return out


def example_inputs():
    return (torch.randn(8, 4),)
