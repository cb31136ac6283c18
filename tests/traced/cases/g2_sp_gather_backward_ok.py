"""Sequence parallel (a gpt-neox-style mapping): each rank reads its block of rows of x; the rows
are gathered before a column-parallel matmul.  The gather's backward reduce-scatters (sums the
ranks' partial gradients and keeps the rank's rows), as g2_sp_gather_backward_bug.py does not.

Expected: verified; gloo: outputs and gradients match.
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
        local = torch.empty_like(grad.chunk(dist.get_world_size(), dim=0)[0])
        dist.reduce_scatter_tensor(local, grad.contiguous())
        return local


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
