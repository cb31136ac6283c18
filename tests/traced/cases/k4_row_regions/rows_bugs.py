"""The same regions with two faulty backwards (each on the line marked 'the bug')."""
import torch
import torch.distributed as dist

from .rows import GatherRows  # noqa: F401  (re-exported: the drivers import both from here)


class ScatterRowsNoGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()

    @staticmethod
    def backward(ctx, grad):
        return grad   # the bug: the rows of the other ranks are not gathered back


class ScatterRowsUnbound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()

    @staticmethod
    def backward(ctx, grad):
        if dist.get_world_size() > 1:
            dist.all_gather(pieces, grad.contiguous())   # the bug: gathers into a list not made yet
            pieces = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
            return torch.cat(pieces, dim=0)
        return grad


class CopyToRanksNoReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad   # the bug: each rank's partial sum of the gradient is passed on, not summed
