"""Tensor-parallel MLP over weights passed whole (each rank uses its column block of w1 and row
block of w2); the partial sums are all-reduced in place with a plain dist.all_reduce.  Nothing
all-reduces the gradient of x in backward: it stays each rank's partial sum.

Expected: violations (gradient of x); gloo: input gradient mismatch.
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, FFN = 4, 6, 8


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w1, w2):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = torch.relu(x @ w1.chunk(world, dim=1)[rank])
    y = h @ w2.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y
