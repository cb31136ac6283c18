"""nanotron-style TP MLP that reduces with an in-place `dist.all_reduce` in forward.

The row-parallel output is summed with a plain `dist.all_reduce(out, group=tp_pg)`, which
autograd does not see, and the replicated input enters the column-parallel layer without
an identity-forward/all-reduce-backward operator.  The forward output is right.  In
backward each rank's gradient of the input holds only the contribution of its own weight
columns: the input gradient is an unreduced partial sum (parameter gradients are right).

violations
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SEQ, BATCH, HIDDEN, FFN = 12, 2, 16, 40


class TensorParallelColumnLinear(nn.Module):
    def __init__(self, in_features, out_features, pg: dist.ProcessGroup):
        super().__init__()
        self.pg = pg
        self.weight = nn.Parameter(torch.randn(out_features // pg.size(), in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.zeros(out_features // pg.size()))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class TensorParallelRowLinear(nn.Module):
    def __init__(self, in_features, out_features, pg: dist.ProcessGroup):
        super().__init__()
        self.pg = pg
        self.weight = nn.Parameter(torch.randn(out_features, in_features // pg.size()) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x):
        out = F.linear(x, self.weight)
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=self.pg)
        return out + self.bias


class MLP(nn.Module):
    def __init__(self, tp_pg: dist.ProcessGroup):
        super().__init__()
        self.gate_up = TensorParallelColumnLinear(HIDDEN, FFN, tp_pg)
        self.down = TensorParallelRowLinear(FFN, HIDDEN, tp_pg)

    def forward(self, hidden_states):
        return self.down(F.gelu(self.gate_up(hidden_states)))


def example_module():
    tp_pg = dist.new_group(list(range(dist.get_world_size())))
    return MLP(tp_pg)


def example_inputs():
    return (torch.randn(BATCH, SEQ, HIDDEN, requires_grad=True),)
