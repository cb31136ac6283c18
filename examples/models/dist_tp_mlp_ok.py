"""Tensor-parallel MLP with explicit torch.distributed.

The up projection is split by columns, so every rank computes complete values for its
slice of the hidden units and applies GELU to them; the down projection is split by
rows, so every rank computes a partial sum of the output.  One all-reduce of those
partial sums gives the replicated output.

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
    return y
