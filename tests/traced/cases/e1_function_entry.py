"""Autograd Functions named as entries (tests/traced/test_library_entries.py): each is entered through
``.apply`` with its forward's parameters after ``ctx``.  ``_AverageOverRanks`` sums a replicated value
over the group and divides by its size (what one device computes); ``_SumOverRanks`` forgets the
division (world times the value)."""
import torch
import torch.distributed as dist


class _AverageOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out / dist.get_world_size(group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _SumOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None
