"""Megatron-core sequence-parallel MLP block (sequence_parallel=True).

The replicated input [seq, batch, hidden] is split along the sequence; LayerNorm runs on
the shard; ColumnParallelLinear all-gathers the sequence before its matmul and
RowParallelLinear reduce-scatters its partial sums back to sequence shards; the residual
is added on the shard and the sequence is gathered again at the end.  The LayerNorm
parameters are marked `sequence_parallel` (their gradients are partial per rank and
are all-reduced by Megatron's gradient finalisation).

Expected: verified
"""
import torch
import torch.nn.functional as F
from megatron.core import ModelParallelConfig, parallel_state
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
from megatron.core.tensor_parallel.mappings import (gather_from_sequence_parallel_region,
                                                    scatter_to_sequence_parallel_region)

SEQ, BATCH, HIDDEN, FFN = 8, 2, 16, 32


class SequenceParallelMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        tp = parallel_state.get_tensor_model_parallel_world_size()
        # as Megatron's own arguments do: sequence parallelism only with tensor parallelism
        config = ModelParallelConfig(tensor_model_parallel_size=tp, use_cpu_initialization=True,
                                     sequence_parallel=tp > 1)
        init = torch.nn.init.xavier_normal_
        self.norm = torch.nn.LayerNorm(HIDDEN)
        for p in self.norm.parameters():
            p.sequence_parallel = True
        self.fc1 = ColumnParallelLinear(HIDDEN, FFN, config=config, init_method=init, bias=True,
                                        gather_output=False)
        self.fc2 = RowParallelLinear(FFN, HIDDEN, config=config, init_method=init, bias=False,
                                     input_is_parallel=True, skip_bias_add=False)

    def forward(self, x):
        x = scatter_to_sequence_parallel_region(x)
        h, _ = self.fc1(self.norm(x))
        y, _ = self.fc2(F.gelu(h))
        return gather_from_sequence_parallel_region(x + y, tensor_parallel_output_grad=False)


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN),)
