"""Row-parallel first layer: all-reduce the partial sums, then GELU, then a replicated layer.

The input features and the rows of w1 are split across ranks, so `x_local @ w1_local`
is a partial sum; it is all-reduced before the non-linearity.

Expected: verified
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, OUT = 8, 32, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w1, w2):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = x.chunk(world, dim=1)[rank] @ w1.chunk(world, dim=0)[rank]
    dist.all_reduce(h)
    h = F.gelu(h)
    return h @ w2
