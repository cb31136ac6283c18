"""The bug: the up-projection's rows are dealt out strided (rank r holds hidden units r, r + world,
...) but the down-projection's columns contiguously (rank r holds hidden units r * FFN / world on), so
a rank multiplies hidden units by the weights of other units.  Both pieces have the shapes of a
contiguous split: a layout guessed from the shapes pairs them up and proves a program that is not
this one.

Expected: violations (output 0 differs); gloo: outputs differ.
"""
import torch
import torch.distributed as dist
import torch.nn as nn

HIDDEN, FFN = 4, 8


class CopyToRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class SumOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class Projection(nn.Module):
    def __init__(self, weight, bias=None):
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = None if bias is None else nn.Parameter(bias)


class StridedMLP(nn.Module):
    def __init__(self, rank, world):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        up = torch.randn(FFN, HIDDEN, generator=generator)
        down = torch.randn(HIDDEN, FFN, generator=generator)
        self.up = Projection(up[rank::world].clone(), torch.zeros(FFN // world))
        per_rank = FFN // world
        self.down = Projection(down[:, rank * per_rank:(rank + 1) * per_rank].clone())

    def forward(self, x):
        h = torch.tanh(CopyToRanks.apply(x) @ self.up.weight.t() + self.up.bias)
        return SumOverRanks.apply(h @ self.down.weight.t())


def build(mesh):
    return StridedMLP(dist.get_rank(), dist.get_world_size())


def example_inputs():
    return (torch.randn(3, HIDDEN),)
