"""Row-parallel linear layer whose partial sums are all-gathered and concatenated.

Twin of dist_rowparallel_ok.py using the wrong kind of collective: the partial sums
must be added (all-reduce), not stacked (all-gather).

Bug: all_gather + cat where all_reduce is needed; the output has world times the rows
and none of them is the full sum.

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
    parts = [torch.empty_like(y) for _ in range(world)]
    dist.all_gather(parts, y)
    return torch.cat(parts, dim=0)
