"""Sequence-parallel style row regions of a user's own package: scatter rows to the ranks, gather them back."""
import torch
import torch.distributed as dist


class ScatterRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()

    @staticmethod
    def backward(ctx, grad):
        pieces = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, grad.contiguous())
        return torch.cat(pieces, dim=0)


class GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, x.contiguous())
        return torch.cat(pieces, dim=0)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()


class CopyToRanks(torch.autograd.Function):
    """Tensor-parallel region entry: the input as it is; its gradient, a partial sum on each rank, summed."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class ReduceFromRanks(torch.autograd.Function):
    """Tensor-parallel region exit: the ranks' partial sums summed; the gradient passed on as it is."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad
