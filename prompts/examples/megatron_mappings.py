"""Megatron-core f/g operators around local matmuls (a tensor-parallel MLP)."""
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
        return reduce_from_tensor_model_parallel_region(h @ self.w_out)


def example_inputs():
    return (torch.randn(8, HIDDEN),)
