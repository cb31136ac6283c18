"""Row-parallel linear summed, then averaged again: the forward is right, but gloo divides where autograd
sees it (an all_reduce(op=AVG) is a sum then tensor.div_(world)), so the input gradients are 1/world
of the single device's.  Ground truth (tests/groundtruth/runner.py --grad): forward matches, gradients
differ.  Expected: not verified.
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 8, 32, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    dist.all_reduce(y, op=dist.ReduceOp.AVG)
    return y
