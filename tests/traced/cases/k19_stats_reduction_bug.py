"""k19_stats_reduction_ok.py without the all-reduce of the row sums: the values first go wrong where the
partial sum is read (the centering line), and the reduction belongs after the line that made it, which
the finding names as its repair line."""
import torch
import torch.distributed as dist

OUT = 16


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = x @ w.chunk(world, dim=1)[rank]
    total = h.sum(dim=-1, keepdim=True)  # the bug: a partial sum of the ranks, never all-reduced
    centered = h - total / OUT
    parts = [torch.empty_like(centered) for _ in range(world)]
    dist.all_gather(parts, centered)
    return torch.cat(parts, dim=1)


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, OUT, requires_grad=False)
