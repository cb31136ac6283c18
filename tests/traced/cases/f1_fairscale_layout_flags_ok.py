"""fairscale GeLU MLP, its layers' layout flags right (the column layer keeps its output split, the row
layer takes it split): verified, the twins below differ on 2 gloo ranks."""
import torch
import torch.nn.functional as F
from fairscale.nn.model_parallel.initialize import initialize_model_parallel
from fairscale.nn.model_parallel.layers import ColumnParallelLinear, RowParallelLinear

BATCH, HIDDEN, FFN = 4, 8, 16


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = ColumnParallelLinear(HIDDEN, FFN, bias=True, gather_output=False)
        self.down = RowParallelLinear(FFN, HIDDEN, bias=True, input_is_parallel=True)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def example_module():
    initialize_model_parallel(torch.distributed.get_world_size())
    return MLP()


def example_inputs():
    return (torch.randn(BATCH, HIDDEN, requires_grad=True),)
