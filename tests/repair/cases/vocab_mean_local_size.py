"""Vocabulary-parallel sum and mean of the logits (a label-smoothing term), the mean divided by the rank's own vocabulary size.

Each rank holds a block of the vocabulary dim of the logits; the sum over the vocabulary is
all-reduced (forward only), but the author divides it by `part`, the size of the rank's block, not
by the whole vocabulary: right on one rank, `world` times too large on more.
"""
import torch
import torch.distributed as dist

TOKENS, VOCAB = 4, 8


def example_inputs():
    return (torch.randn(TOKENS, VOCAB, requires_grad=False),)


def forward(logits):
    rank, world = dist.get_rank(), dist.get_world_size()
    local = logits.chunk(world, dim=-1)[rank]
    part = local.size(-1)
    total = local.sum(dim=-1)
    dist.all_reduce(total)
    return total, total / part
