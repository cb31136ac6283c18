"""Tensor-parallel MLP over weights passed whole, as g1_tp_mlp_input_grad_bug.py, with x entering
through Megatron's "f" operator (identity forward, all-reduce of the gradient in backward).

Expected: verified; gloo: outputs and gradients match.
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, FFN = 4, 6, 8


class CopyToTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w1, w2):
    rank, world = dist.get_rank(), dist.get_world_size()
    x = CopyToTensorParallel.apply(x)
    h = torch.relu(x @ w1.chunk(world, dim=1)[rank])
    y = h @ w2.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y
