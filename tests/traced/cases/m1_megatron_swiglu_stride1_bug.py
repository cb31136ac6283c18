"""A SwiGLU MLP on megatron-core layers: one fused gate/up projection, split with partition stride 2.

fc1 holds [gate; up] stacked; with ``stride=2`` megatron-core gives each rank its piece of
the gate rows followed by its piece of the up rows, so ``chunk(2, dim=-1)`` on a rank splits
its own gate from its own up.

violations: with partition stride 1 a rank's chunk(2) splits gate rows from gate rows
(rank 0 holds only gate rows of the fused [gate; up] weight, rank 1 only up rows)
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state
from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear

SEQ, BATCH, HIDDEN, FFN = 6, 2, 8, 16


class SwiGLU(torch.nn.Module):
    def __init__(self, config: ModelParallelConfig):
        super().__init__()
        init = torch.nn.init.xavier_normal_
        self.fc1 = ColumnParallelLinear(HIDDEN, 2 * FFN, config=config, init_method=init, bias=False,
                                        gather_output=False, stride=1)
        self.fc2 = RowParallelLinear(FFN, HIDDEN, config=config, init_method=init, bias=False,
                                     input_is_parallel=True, skip_bias_add=False)

    def forward(self, hidden_states):
        fused, _ = self.fc1(hidden_states)
        gate, up = torch.chunk(fused, 2, dim=-1)
        out, _ = self.fc2(F.silu(gate) * up)
        return out


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = ModelParallelConfig(tensor_model_parallel_size=tp, use_cpu_initialization=True,
                                 perform_initialization=True, params_dtype=torch.float32)
    return SwiGLU(config)


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True),)
