"""A tensor-parallel MLP written by hand with megatron-core's mapping functions.

The full weights are the function's inputs (the same on every rank); each rank uses its row
block of the up projection and its column block of the down projection; megatron-core's
mappings carry the collectives.
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state
from megatron.core.tensor_parallel.mappings import (copy_to_tensor_model_parallel_region,
                                                    reduce_from_tensor_model_parallel_region)

SEQ, BATCH, HIDDEN, FFN = 4, 2, 8, 16


def forward(x, w_up, w_down):
    world = parallel_state.get_tensor_model_parallel_world_size()
    rank = parallel_state.get_tensor_model_parallel_rank()
    w_up_shard = torch.chunk(w_up, world, dim=0)[rank]
    w_down_shard = torch.chunk(w_down, world, dim=1)[rank]
    x = copy_to_tensor_model_parallel_region(x)
    h = F.gelu(x @ w_up_shard.t())
    y = h @ w_down_shard.t()
    return reduce_from_tensor_model_parallel_region(y)


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True),
            torch.randn(FFN, HIDDEN, requires_grad=True),
            torch.randn(HIDDEN, FFN, requires_grad=True))
