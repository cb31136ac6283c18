"""A tensor-parallel MLP written by hand with Megatron's two region functions (t7 twin cases).

violations: the copy is dropped (the line marked 'the bug'): the forward is the same, but each rank's
gradient of x stays a partial sum; the violation names the line that bound x_parallel, not the matmul.
"""
import torch
import torch.distributed as dist


class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def forward(x, w1, w2):
    world, rank = dist.get_world_size(), dist.get_rank()
    x_parallel = x  # the bug: the copy to the parallel region was dropped
    hidden = torch.relu(x_parallel @ w1.chunk(world, 1)[rank])
    return Reduce.apply(hidden @ w2.chunk(world, 0)[rank])


def example_inputs():
    return torch.randn(4, 8, requires_grad=True), torch.randn(8, 6), torch.randn(6, 8)
