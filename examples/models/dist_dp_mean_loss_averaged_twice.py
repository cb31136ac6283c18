"""Data-parallel mean-squared error that pre-divides by the world size and divides again.

Twin of dist_dp_mean_loss_ok.py.  The local mean is pre-divided by world before the
all-reduce (like gradient pre-division) and the sum is divided by world once more.

Bug: averaged twice, the loss is scaled by 1/world.

Expected: violations
"""
import torch
import torch.distributed as dist

BATCH, FEATURES, OUT = 8, 16, 4


def example_inputs():
    return torch.randn(BATCH, FEATURES), torch.randn(BATCH, OUT), torch.randn(FEATURES, OUT)


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    err = x.chunk(world, dim=0)[rank] @ w - target.chunk(world, dim=0)[rank]
    loss = (err * err).mean(dim=0) / world
    dist.all_reduce(loss)
    return loss / world
