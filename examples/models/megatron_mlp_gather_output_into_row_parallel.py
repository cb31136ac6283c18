"""Megatron-core MLP whose ColumnParallelLinear gathers its output before a row-parallel layer.

Twin of megatron_mlp_ok.py with gather_output=True on fc1.

Bug: fc1 all-gathers the full FFN activations, but fc2 (input_is_parallel=True) expects
this rank's FFN/world slice: the placements disagree (Replicate fed where Shard(-1) is
required), which fails with a shape error on more than one rank.

Expected: violations
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
                                        gather_output=True)
        self.fc2 = RowParallelLinear(FFN, HIDDEN, config=config, init_method=init, bias=True,
                                     input_is_parallel=True, skip_bias_add=False)

    def forward(self, x):
        h, _ = self.fc1(x)
        y, _ = self.fc2(F.gelu(h))
        return y


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN),)
