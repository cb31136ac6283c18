"""Pattern 3: the broadcast source depends on the world size (``src=1`` needs two ranks).

Rank 1 owns the weight update and broadcasts it; on one rank the only source is rank 0.
Harmless: every rank ends with the same tensor, and so does the 1-rank run.

Expected: verified
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 4, 6


def example_inputs():
    return torch.randn(ROWS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w):
    world = dist.get_world_size()
    y = x @ w
    dist.broadcast(y, src=1 if world > 1 else 0)
    return y
