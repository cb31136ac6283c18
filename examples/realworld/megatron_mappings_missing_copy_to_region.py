"""Tensor-parallel MLP from megatron-core mappings that forgets `copy_to_tensor_model_parallel_region`.

The replicated input should go through `copy_to_tensor_model_parallel_region` (identity
forward, all-reduce of the input gradient backward); here it is fed straight into the
column-sharded matmul.  The forward pass is exact, but each rank's input gradient is only
the part flowing through its own weight columns: the gradient of `x` is a partial sum.
Otherwise as in megatron_mappings_tp_mlp.py: weight slices per rank and
`reduce_from_tensor_model_parallel_region` summing the partial outputs.

violations
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
    h = F.silu(x @ w_up_shard)
    partial = h @ w_down_shard
    return mappings.reduce_from_tensor_model_parallel_region(partial)


def example_inputs():
    return (torch.randn(TOKENS, HIDDEN, requires_grad=True),
            torch.randn(HIDDEN, FFN, requires_grad=True),
            torch.randn(FFN, HIDDEN, requires_grad=True))
