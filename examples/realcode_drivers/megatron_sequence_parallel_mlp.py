"""Megatron-style sequence parallelism with megatron-core's mappings, written out by hand.

The input arrives split along the sequence; a LayerNorm runs on the local tokens; the tokens
are all-gathered before the column-parallel projection and the row-parallel partial sums are
reduce-scattered back to sequence shards; the output is gathered for the caller.
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state
from megatron.core.tensor_parallel.mappings import (gather_from_sequence_parallel_region,
                                                    reduce_scatter_to_sequence_parallel_region,
                                                    scatter_to_sequence_parallel_region)

SEQ, BATCH, HIDDEN, FFN = 8, 2, 8, 16


def forward(x, w_up, w_down):
    world = parallel_state.get_tensor_model_parallel_world_size()
    rank = parallel_state.get_tensor_model_parallel_rank()
    w_up_shard = torch.chunk(w_up, world, dim=0)[rank]
    w_down_shard = torch.chunk(w_down, world, dim=1)[rank]
    local = scatter_to_sequence_parallel_region(x)
    local = F.layer_norm(local, (HIDDEN,))
    full = gather_from_sequence_parallel_region(local)
    h = F.gelu(full @ w_up_shard.t())
    partial = h @ w_down_shard.t()
    local_out = reduce_scatter_to_sequence_parallel_region(partial)
    return gather_from_sequence_parallel_region(local_out, tensor_parallel_output_grad=False)


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True),
            torch.randn(FFN, HIDDEN, requires_grad=True),
            torch.randn(HIDDEN, FFN, requires_grad=True))
