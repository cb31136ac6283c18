"""Pattern 3 (buggy twin): rank 1 broadcasts a value only it computes differently.

Rank 1 scales its copy by two before broadcasting, so the N-rank result is twice the
1-rank result.

Expected: violations (line of the scaling)
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 4, 6


def example_inputs():
    return torch.randn(ROWS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w):
    world = dist.get_world_size()
    y = x @ w
    if world > 1:
        y = y * 2.0
    dist.broadcast(y, src=1 if world > 1 else 0)
    return y
