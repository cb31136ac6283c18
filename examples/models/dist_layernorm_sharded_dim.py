"""LayerNorm applied to a column-parallel activation, over its sharded feature dim.

Twin of dist_layernorm_allreduce_stats_ok.py that calls F.layer_norm on the local slice.

Bug: LayerNorm over a sharded dim: mean and variance are taken over this rank's
OUT/world features instead of all OUT features.

Expected: violations
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, OUT = 8, 16, 32
EPS = 1e-5


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = x @ w.chunk(world, dim=1)[rank]
    normed = F.layer_norm(h, (OUT // world,), eps=EPS)
    parts = [torch.empty_like(normed) for _ in range(world)]
    dist.all_gather(parts, normed)
    return torch.cat(parts, dim=1)
