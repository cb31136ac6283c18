"""Row-parallel linear layer whose partial sums are all-reduced with MAX.

Twin of dist_rowparallel_ok.py with the reduce op changed.

Bug: partial sums must be combined with SUM; MAX keeps the largest partial.

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
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    return y
