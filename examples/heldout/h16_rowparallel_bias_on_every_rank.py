"""Tensor-parallel MLP block written with plain collectives: the up projection is column parallel
(each rank its slice of the hidden units), the down projection row parallel, its partial sums
all-reduced by an autograd function whose backward passes the gradient through; the input enters
through an identity whose backward all-reduces.  The down projection's bias is added by every rank
before the all-reduce.

violations (forward): the bias is added on every rank before the sum, so the output carries it world times
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SEQ, DIM, HIDDEN = 4, 6, 8


class CopyToRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


class SumOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class ParallelMLP(nn.Module):
    def __init__(self):
        super().__init__()
        rank, world = dist.get_rank(), dist.get_world_size()
        cols = HIDDEN // world
        part = slice(rank * cols, (rank + 1) * cols)
        up, down = nn.Linear(DIM, HIDDEN), nn.Linear(HIDDEN, DIM)   # the same seeded layers on every rank
        self.up_weight = nn.Parameter(up.weight.detach()[part].clone())
        self.up_bias = nn.Parameter(up.bias.detach()[part].clone())
        self.down_weight = nn.Parameter(down.weight.detach()[:, part].clone())
        self.down_bias = nn.Parameter(down.bias.detach().clone())

    def forward(self, x):
        x = CopyToRanks.apply(x)
        h = F.gelu(F.linear(x, self.up_weight, self.up_bias))
        y = F.linear(h, self.down_weight, self.down_bias)
        return SumOverRanks.apply(y)


def example_module():
    return ParallelMLP()


def example_inputs():
    return (torch.randn(SEQ, DIM, requires_grad=True),)
