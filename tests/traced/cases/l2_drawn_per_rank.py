"""A tensor-parallel MLP whose ranks draw their own pieces of the weights with a seed of their own
(rank r seeds r + 1), the contiguous pieces a checkpoint would give them.  The numbers are no slice
of the single-device weights, so the values cannot show a layout and the run on 2 ranks computes
other numbers than one device: nothing supports a proof.  With the layout stated
(--param-layout up.weight=Shard(0) --param-layout down.weight=Shard(1)) it is verified.

Expected: unsupported, naming up.weight; verified with the layouts stated; gloo: outputs differ
(the ranks hold other numbers, not a wrong layout).
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
        generator = torch.Generator().manual_seed(rank + 1 if world > 1 else 0)
        self.up = Projection(torch.randn(FFN // world, HIDDEN, generator=generator))
        self.down = Projection(torch.randn(HIDDEN, FFN // world, generator=generator))

    def forward(self, x):
        h = torch.tanh(CopyToRanks.apply(x) @ self.up.weight.t())
        return SumOverRanks.apply(h @ self.down.weight.t())


def build(mesh):
    return StridedMLP(dist.get_rank(), dist.get_world_size())


def example_inputs():
    return (torch.randn(3, HIDDEN),)
