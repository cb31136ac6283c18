"""Bug: the plan leaves the row-parallel output sharded by tokens (each rank returns a piece)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

TOKENS, DIM, HIDDEN = 6, 8, 16


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def build(mesh):
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel(output_layouts=Shard(0))}
    return parallelize_module(MLP(), mesh, plan)


def example_inputs():
    return (torch.randn(TOKENS, DIM, requires_grad=True),)
