"""Tensor-parallel MLP with a residual connection, all-reduced exactly once.

Twin of dist_tp_mlp_double_allreduce.py: the partial sums of the down projection are
all-reduced, then the (replicated) residual is added.

Expected: verified
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 8, 16, 64


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(x @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    out = x + y
    return out
