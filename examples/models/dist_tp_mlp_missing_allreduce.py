"""Tensor-parallel MLP that never reduces the row-parallel partial sums.

Same program as dist_tp_mlp_ok.py without the final all-reduce: each rank returns
only its own partial sum of the down projection.

Bug: missing all-reduce after the row-parallel down projection (line of `y = ...`).

Expected: violations
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
    return y
