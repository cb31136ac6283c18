"""A tensor-parallel MLP written by hand with fairscale's mapping functions.

The full weights are the function's inputs (the same on every rank); each rank multiplies by
its row block of the up projection and its column block of the down projection, and the
mappings carry the collectives: copy (all-reduce of the input gradient in backward) and
reduce (all-reduce of the partial sums in forward).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from fairscale.nn.model_parallel.initialize import initialize_model_parallel
from fairscale.nn.model_parallel.mappings import (copy_to_model_parallel_region,
                                                  reduce_from_model_parallel_region)

BATCH, HIDDEN, FFN = 4, 8, 16


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    initialize_model_parallel(world)
    w_up_shard = torch.chunk(w_up, world, dim=0)[rank]
    w_down_shard = torch.chunk(w_down, world, dim=1)[rank]
    x = copy_to_model_parallel_region(x)
    h = F.gelu(x @ w_up_shard.t())
    y = h @ w_down_shard.t()
    return reduce_from_model_parallel_region(y)


def example_inputs():
    return (torch.randn(BATCH, HIDDEN, requires_grad=True),
            torch.randn(FFN, HIDDEN, requires_grad=True),
            torch.randn(HIDDEN, FFN, requires_grad=True))
