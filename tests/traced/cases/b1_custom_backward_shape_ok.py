"""A custom all-reduce Function with a hand-written backward (the gradient passes through).

verified
"""
import torch
import torch.distributed as dist


class ReduceFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def forward(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    return ReduceFromRegion.apply(partial)


def example_inputs():
    return torch.randn(4, 8, requires_grad=True), torch.randn(8, 6, requires_grad=True)
