"""Megatron-core tensor-parallel MLP: ColumnParallelLinear (no gather) -> GeLU -> RowParallelLinear.

The textbook Megatron MLP block: the first projection is split by output features, the
activation runs on the shards, the second projection is split by input features and its
partial sums are all-reduced inside RowParallelLinear.  Weights are initialised on CPU
(`use_cpu_initialization=True`) as one master weight then split, as Megatron does.

verified
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state
from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear

SEQ, BATCH, HIDDEN, FFN = 12, 2, 16, 40


class ParallelMLP(torch.nn.Module):
    def __init__(self, config: ModelParallelConfig, hidden: int, ffn: int):
        super().__init__()
        init = torch.nn.init.xavier_normal_
        self.fc1 = ColumnParallelLinear(hidden, ffn, config=config, init_method=init, bias=True,
                                        gather_output=False)
        self.fc2 = RowParallelLinear(ffn, hidden, config=config, init_method=init, bias=True,
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
    return ParallelMLP(config, HIDDEN, FFN)


def example_inputs():
    # Megatron layout: [sequence, batch, hidden]
    return (torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True),)
