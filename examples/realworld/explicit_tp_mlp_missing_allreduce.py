"""Explicit tensor parallelism with raw torch.distributed: the row-parallel partial sums are never reduced.

verify-agent style check of a hand-rolled TP MLP: each rank takes its column block of the up
projection and its row block of the down projection, but the author forgot the all-reduce
after the down projection, so every rank returns only its partial sum.

violations
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 6, 16, 40


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(x @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    return y


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)
