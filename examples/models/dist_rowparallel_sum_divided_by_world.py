"""Row-parallel linear layer that divides the all-reduced sum by the world size.

Twin of dist_rowparallel_ok.py.  The author treated the all-reduce as an average of
replicas, but the inputs are partial sums of one matmul: their SUM is already the answer.

Bug: scaling by 1/world (only visible with more than one rank).

Expected: violations
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 8, 32, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y / world
