"""Tensor-parallel MLP whose up-projection rows are dealt out strided (rank r holds hidden units
r, r + world, ...) and whose down-projection columns are dealt out the same way, so each rank's
pieces pair up.  The up-projection's bias is zeros (its values fit every layout; the weight's show it).

Expected: verified (layouts from the values: strided for up.weight, down.weight and up.bias);
gloo: outputs match.
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
        self.down = Projection(down[:, rank::world].clone())

    def forward(self, x):
        h = torch.tanh(CopyToRanks.apply(x) @ self.up.weight.t() + self.up.bias)
        return SumOverRanks.apply(h @ self.down.weight.t())


def build(mesh):
    return StridedMLP(dist.get_rank(), dist.get_world_size())


def example_inputs():
    return (torch.randn(3, HIDDEN),)
