"""Sequence parallelism by hand: each rank normalises its own tokens with a LayerNorm of its own,
then the tokens are gathered.  The norm's weight and bias gradients are each rank's part only
(its own tokens): nothing all-reduces them (Megatron marks such weights ``sequence_parallel`` and
all-reduces their gradients).  The bug is the norm made without that reduction.

Expected: violations (gradient of norm.weight), named at the line that makes the norm; gloo: the
parameters' gradients differ.
"""
import torch
import torch.distributed as dist
import torch.nn as nn

TOKENS, HIDDEN = 4, 6


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
        self.norm = nn.LayerNorm(HIDDEN)  # the bug: its gradients are never all-reduced

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        mine = self.norm(x.chunk(world, dim=0)[rank])
        return _GatherTokens.apply(mine)


def example_module():
    torch.manual_seed(0)
    return SequenceParallelNorm()


def example_inputs():
    return (torch.randn(TOKENS, HIDDEN),)
