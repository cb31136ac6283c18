"""Hand-written Megatron f operator whose backward forgets the all-reduce.

Twin of dist_custom_autograd_f_ok.py.  The forward pass is identical and correct; in
backward, CopyToTensorParallel returns this rank's partial gradient of x unreduced.

Bug: the gradient of the replicated input is a partial sum on every rank (the custom
autograd.Function backward misses its all-reduce).  Only gradients show it.

Expected: violations
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 8, 16, 32


class CopyToTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ReduceFromTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = CopyToTensorParallel.apply(x) @ w_up.chunk(world, dim=1)[rank]
    y = F.gelu(h) @ w_down.chunk(world, dim=0)[rank]
    return ReduceFromTensorParallel.apply(y)
