"""As k3_sp_norm_grad_bug.py, with the norm's gradients all-reduced over the ranks after the backward
(a hook on each parameter, as Megatron's gradient finalisation does for ``sequence_parallel`` weights).

Expected: verified; gloo: outputs and gradients match.
"""
import torch
import torch.distributed as dist
import torch.nn as nn

TOKENS, HIDDEN = 4, 6


def _summed(grad):
    grad = grad.clone()
    dist.all_reduce(grad)
    return grad


class _GatherTokens(torch.autograd.Function):
    """All-gather of the ranks' tokens; its backward keeps the rank's own rows of a gradient every
    rank holds whole (the output is replicated), as Megatron's gather from the sequence-parallel
    region does when the output gradient is not tensor-parallel."""

    @staticmethod
    def forward(ctx, mine):
        pieces = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, mine.contiguous())
        return torch.cat(pieces, dim=0)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()


class SequenceParallelNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        for p in self.norm.parameters():
            p.register_hook(_summed)

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        mine = self.norm(x.chunk(world, dim=0)[rank])
        return _GatherTokens.apply(mine)


def example_module():
    torch.manual_seed(0)
    return SequenceParallelNorm()


def example_inputs():
    return (torch.randn(TOKENS, HIDDEN),)
