"""As m1_megatron_swiglu_stride2_ok.py, with fc1 built with gather_output=True: every rank gets the whole
fused output, chunks it into the whole gate and up, and fc2 (input_is_parallel=True) cannot multiply them
by its piece of the weight.

violations: the rank raises in fc2's call; the repair goes where fc1 is built (the line marked 'the bug').
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
        self.fc1 = ColumnParallelLinear(HIDDEN, 2 * FFN, config=config, init_method=init, bias=False,  # the bug
                                        gather_output=True, stride=2)
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
