"""A GeLU MLP on megatron-core layers, both cut contiguously (partition stride 1): each rank's fc1 rows
meet its own fc2 columns.  verified (the twin of m2_megatron_mlp_stride2_bug.py)."""
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
        column = dict(config=config, init_method=init, bias=False, gather_output=False)
        self.fc1 = ColumnParallelLinear(HIDDEN, FFN, **column, stride=1)
        self.fc2 = RowParallelLinear(FFN, HIDDEN, config=config, init_method=init, bias=False, input_is_parallel=True,
                                     skip_bias_add=False)

    def forward(self, hidden_states):
        h, _ = self.fc1(hidden_states)
        out, _ = self.fc2(F.gelu(h))
        return out


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = ModelParallelConfig(tensor_model_parallel_size=tp, use_cpu_initialization=True,
                                 perform_initialization=True, params_dtype=torch.float32)
    return MLP(config)


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True),)
