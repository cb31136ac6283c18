"""Async all-reduce of row-parallel partial sums overlapped with an independent matmul.

The handle is waited on before the reduced buffer is read.

Expected: verified
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN = 8, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN), torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w, other, v):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    work = dist.all_reduce(y, async_op=True)
    side = torch.tanh(other @ v)
    work.wait()
    return y + side
