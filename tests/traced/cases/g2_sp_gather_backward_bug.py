"""Sequence parallel (a gpt-neox-style mapping): each rank reads its block of rows of x; the rows
are gathered before a column-parallel matmul.  The gather's backward keeps only the rank's rows of
its own partial gradient (a split) where it must reduce-scatter (sum the ranks' partial gradients).

Expected: violations (gradient of x); gloo: input gradient mismatch.
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN, FFN = 4, 6, 8


class GatherFromSequenceParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, local):
        pieces = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, local.contiguous())
        return torch.cat(pieces, dim=0)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()


class ReduceFromTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, partial):
        partial = partial.clone()
        dist.all_reduce(partial)
        return partial

    @staticmethod
    def backward(ctx, grad):
        return grad


def example_inputs():
    return torch.randn(ROWS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w1, w2):
    rank, world = dist.get_rank(), dist.get_world_size()
    full = GatherFromSequenceParallel.apply(x.chunk(world, dim=0)[rank])
    h = torch.relu(full @ w1.chunk(world, dim=1)[rank])
    return ReduceFromTensorParallel.apply(h @ w2.chunk(world, dim=0)[rank])
