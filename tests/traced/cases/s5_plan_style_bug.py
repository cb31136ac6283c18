"""A DTensor tensor-parallel plan for a two-layer MLP, one style a line (s5 twin cases).

violations: the down projection is column-wise too (the line marked 'the bug'): its weight's rows are
sharded while its input is the up projection's feature shards, so DTensor's sharding propagation
raises on the ranks (in torch, at no line of this file); named at the line that made that style.
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
    plan = {
        "up": ColwiseParallel(),
        "down": ColwiseParallel(),  # the bug: a row-wise layer planned column-wise
    }
    return parallelize_module(MLP(), mesh, plan)
