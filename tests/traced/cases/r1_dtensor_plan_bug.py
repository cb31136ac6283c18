"""A wrong DTensor plan for a two-layer MLP: the up projection row-wise, the down projection
column-wise.  Each rank reads the whole input as its shard of twice as many features: its matmul
has mismatched shapes on 2 ranks (on one device the shard is the whole input).

Expected: violations (rank 0 raises at the up projection); gloo: the 2-rank run raises.
"""
import torch
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

TOKENS, HIDDEN, FFN = 4, 8, 16


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(HIDDEN, FFN, bias=False)
        self.down = torch.nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def example_inputs():
    return (torch.randn(TOKENS, HIDDEN),)


def build(mesh):
    torch.manual_seed(0)
    model = MLP()
    return parallelize_module(model, mesh, {"up": RowwiseParallel(), "down": ColwiseParallel()})
