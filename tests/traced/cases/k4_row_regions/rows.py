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
