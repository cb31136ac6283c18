"""A GeLU MLP built from megatron-core's tensor-parallel layers, as a training script writes it.

ColumnParallelLinear (no gather) -> GeLU -> RowParallelLinear (input already split); the
weights are drawn on the CPU as one master weight and split by megatron-core itself.
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state
from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear

SEQ, BATCH, HIDDEN, FFN = 6, 2, 8, 16


class MLP(torch.nn.Module):
    def __init__(self, config: ModelParallelConfig):
        super().__init__()
        init = torch.nn.init.xavier_normal_
        self.fc1 = ColumnParallelLinear(HIDDEN, FFN, config=config, init_method=init, bias=True,
                                        gather_output=False, stride=1)
        self.fc2 = RowParallelLinear(FFN, HIDDEN, config=config, init_method=init, bias=True,
                                     input_is_parallel=True, skip_bias_add=False)

    def forward(self, hidden_states):
        h, _ = self.fc1(hidden_states)
        h = F.gelu(h)
        out, _ = self.fc2(h)
        return out


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = ModelParallelConfig(tensor_model_parallel_size=tp, use_cpu_initialization=True,
                                 perform_initialization=True, params_dtype=torch.float32)
    return MLP(config)


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True),)
