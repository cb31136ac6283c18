"""DTensor tensor-parallel MLP: ColwiseParallel up projection, RowwiseParallel down projection.

The colwise layer returns its local slice of the hidden units (use_local_output=True),
GELU is elementwise, and the rowwise layer treats its input as Shard(-1) and
all-reduces to a replicated output.

Expected: verified
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

TOKENS, DIM, HIDDEN = 8, 16, 64


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def example_inputs():
    return (torch.randn(TOKENS, DIM),)


def build(mesh):
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    return parallelize_module(MLP(), mesh, plan)
