"""DTensor plan: colwise up projection, rowwise down projection; the callable gets the global input."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM, HIDDEN = 16, 64


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def example_inputs():
    return (torch.randn(8, DIM),)


def build(mesh):
    plan = {
        "up": ColwiseParallel(),
        "down": RowwiseParallel(),
    }
    model = parallelize_module(MLP(), mesh, plan)

    def run(x):
        return model(x)

    return run
