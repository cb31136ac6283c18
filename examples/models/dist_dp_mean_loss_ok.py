"""Data-parallel mean-squared error: each rank averages its batch shard, then the
local means are summed with an all-reduce and divided by the number of (equal) shards.

Expected: verified
"""
import torch
import torch.distributed as dist

BATCH, FEATURES, OUT = 8, 16, 4


def example_inputs():
    # forward only: a plain dist.all_reduce carries no gradient (DDP reduces the gradients in training),
    # so the inputs are stated not trainable
    return (torch.randn(BATCH, FEATURES, requires_grad=False), torch.randn(BATCH, OUT, requires_grad=False),
            torch.randn(FEATURES, OUT, requires_grad=False))


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    err = x.chunk(world, dim=0)[rank] @ w - target.chunk(world, dim=0)[rank]
    loss = (err * err).mean(dim=0)
    dist.all_reduce(loss)
    return loss / world
