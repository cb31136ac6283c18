"""Hand-written tensor-parallel MLP built from megatron-core's `tensor_parallel.mappings`.

The way Megatron-style code outside the stock layers is written: the replicated input goes
through `copy_to_tensor_model_parallel_region` (identity forward, all-reduce of the input
gradient backward), each rank multiplies by its slice of the weights (`w_up` by output
columns, `w_down` by input rows), and `reduce_from_tensor_model_parallel_region` sums the
partial outputs (all-reduce forward, identity backward).

verified
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state
from megatron.core.tensor_parallel import mappings

TOKENS, HIDDEN, FFN = 6, 16, 40


def forward(x, w_up, w_down):
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    tp_size = parallel_state.get_tensor_model_parallel_world_size()
    w_up_shard = w_up.chunk(tp_size, dim=1)[tp_rank]
    w_down_shard = w_down.chunk(tp_size, dim=0)[tp_rank]
    x = mappings.copy_to_tensor_model_parallel_region(x)
    h = F.silu(x @ w_up_shard)
    partial = h @ w_down_shard
    return mappings.reduce_from_tensor_model_parallel_region(partial)


def example_inputs():
    return (torch.randn(TOKENS, HIDDEN, requires_grad=True),
            torch.randn(HIDDEN, FFN, requires_grad=True),
            torch.randn(FFN, HIDDEN, requires_grad=True))
