"""Megatron-core sequence-parallel block whose LayerNorm weight gradient is never all-reduced.

Activations enter split along the sequence dim (`scatter_to_sequence_parallel_region`);
LayerNorm runs on each rank's tokens; ColumnParallelLinear(sequence_parallel=True)
all-gathers the sequence before its matmul and RowParallelLinear(sequence_parallel=True)
reduce-scatters its partial sums back to sequence shards.  The LayerNorm is plain torch
(FusedLayerNorm needs apex) and the author did not mark its parameters `sequence_parallel`,
so Megatron's gradient finalisation skips them: each rank keeps the LayerNorm weight and bias
gradients of its own tokens only.  The forward pass is exact; the gradients are not.

violations
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state, tensor_parallel
from megatron.core.model_parallel_config import ModelParallelConfig

SEQ, BATCH, HIDDEN, FFN = 12, 2, 16, 40


class SequenceParallelMLPBlock(torch.nn.Module):
    def __init__(self, config: ModelParallelConfig):
        super().__init__()
        self.norm = torch.nn.LayerNorm(HIDDEN)
        # the norm runs on sequence shards, but its parameters are not marked sequence_parallel
        init = torch.nn.init.xavier_normal_
        self.fc1 = tensor_parallel.ColumnParallelLinear(
            HIDDEN, FFN, config=config, init_method=init, bias=True, gather_output=False)
        self.fc2 = tensor_parallel.RowParallelLinear(
            FFN, HIDDEN, config=config, init_method=init, bias=True, input_is_parallel=True,
            skip_bias_add=False)

    def forward(self, hidden_states):
        # [s, b, h] full sequence -> [s/tp, b, h] on each rank
        x = tensor_parallel.scatter_to_sequence_parallel_region(hidden_states)
        residual = x
        h, _ = self.fc1(self.norm(x))
        out, _ = self.fc2(F.gelu(h))
        out = out + residual
        return tensor_parallel.gather_from_sequence_parallel_region(out, tensor_parallel_output_grad=False)


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = ModelParallelConfig(tensor_model_parallel_size=tp, sequence_parallel=tp > 1,
                                 use_cpu_initialization=True, perform_initialization=True)
    return SequenceParallelMLPBlock(config)


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True),)
