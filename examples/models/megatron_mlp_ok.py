"""Megatron-core tensor-parallel MLP: ColumnParallelLinear(gather_output=False) -> GELU ->
RowParallelLinear(input_is_parallel=True).

The column-parallel layer leaves each rank with its slice of the FFN activations, which
is exactly what the row-parallel layer expects; it all-reduces its partial sums and
adds the bias once.  Activations are sequence-first [seq, batch, hidden].

Expected: verified
"""
import torch
import torch.nn.functional as F
from megatron.core import ModelParallelConfig
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear

SEQ, BATCH, HIDDEN, FFN = 8, 2, 16, 64


class ParallelMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = ModelParallelConfig(use_cpu_initialization=True)
        init = torch.nn.init.xavier_normal_
        self.fc1 = ColumnParallelLinear(HIDDEN, FFN, config=config, init_method=init, bias=True,
                                        gather_output=False)
        self.fc2 = RowParallelLinear(FFN, HIDDEN, config=config, init_method=init, bias=True,
                                     input_is_parallel=True, skip_bias_add=False)

    def forward(self, x):
        h, _ = self.fc1(x)
        y, _ = self.fc2(F.gelu(h))
        return y


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN),)
