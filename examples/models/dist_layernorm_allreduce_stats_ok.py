"""LayerNorm over a feature dim that is sharded, done right: the statistics are all-reduced.

A column-parallel projection leaves every rank with a slice of the features.  The
mean and the variance over the full feature dim are computed from all-reduced partial
sums, each rank normalises its slice, and the slices are all-gathered.

Expected: verified
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 8, 16, 32
EPS = 1e-5


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = x @ w.chunk(world, dim=1)[rank]
    total = h.sum(dim=-1, keepdim=True)
    dist.all_reduce(total)
    centered = h - total / OUT
    sq = (centered * centered).sum(dim=-1, keepdim=True)
    dist.all_reduce(sq)
    normed = centered / torch.sqrt(sq / OUT + EPS)
    parts = [torch.empty_like(normed) for _ in range(world)]
    dist.all_gather(parts, normed)
    return torch.cat(parts, dim=1)
