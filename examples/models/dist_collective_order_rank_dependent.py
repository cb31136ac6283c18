"""Two row-parallel projections all-reduced in an order that depends on the rank.

Twin of dist_collective_order_ok.py: rank 0 reduces a then b, the other ranks b then a.

Bug: collectives are matched by issue order, so rank 0's `a` is summed with the
others' `b` (same shape: silently wrong numbers; with different shapes or NCCL it
hangs).  The collective order differs between members of the group.

Expected: violations
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 8, 16, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT), torch.randn(HIDDEN, OUT)


def forward(x, w_a, w_b):
    rank, world = dist.get_rank(), dist.get_world_size()
    x_local = x.chunk(world, dim=1)[rank]
    a = x_local @ w_a.chunk(world, dim=0)[rank]
    b = x_local @ w_b.chunk(world, dim=0)[rank]
    if rank == 0:
        dist.all_reduce(a)
        dist.all_reduce(b)
    else:
        dist.all_reduce(b)
        dist.all_reduce(a)
    return a, b
