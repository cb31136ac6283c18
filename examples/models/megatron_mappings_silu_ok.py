"""Megatron-core mappings around local matmuls, SiLU applied after the reduction.

Twin of megatron_mappings_silu_on_partial.py: the output SiLU consumes the all-reduced
(replicated) value.

Expected: verified
"""
import torch
import torch.nn.functional as F
from megatron.core import parallel_state
from megatron.core.tensor_parallel.mappings import (copy_to_tensor_model_parallel_region,
                                                    reduce_from_tensor_model_parallel_region)

HIDDEN, FFN = 32, 128


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        tp = parallel_state.get_tensor_model_parallel_world_size()
        self.w_in = torch.nn.Parameter(torch.empty(HIDDEN, FFN // tp))
        self.w_out = torch.nn.Parameter(torch.empty(FFN // tp, HIDDEN))

    def forward(self, x):
        x = copy_to_tensor_model_parallel_region(x)
        h = F.silu(x @ self.w_in)
        return F.silu(reduce_from_tensor_model_parallel_region(h @ self.w_out))


def example_inputs():
    return (torch.randn(8, HIDDEN),)
