"""Layer-norm statistics of a column-parallel activation: each rank sums its columns and the sum is
all-reduced before it is read (the twin of k19_stats_reduction_bug.py)."""
import torch
import torch.distributed as dist

OUT = 16


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = x @ w.chunk(world, dim=1)[rank]
    total = h.sum(dim=-1, keepdim=True)
    dist.all_reduce(total)
    centered = h - total / OUT
    parts = [torch.empty_like(centered) for _ in range(world)]
    dist.all_gather(parts, centered)
    return torch.cat(parts, dim=1)


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, OUT, requires_grad=False)
