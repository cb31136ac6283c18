"""A sequence-to-head reshard through an autograd-aware all-to-all of torch's functional collectives
(t9 twin cases).  ``x`` is the rank's block of tokens (``--expect x=Shard(0)``); the output is its block
of heads (``--expect out=Shard(1)``).

violations: ``exchanged`` is bound to the un-exchanged blocks (the line marked 'the bug'); every rank ends
with its own tokens only; named at that line, not at the ``cat`` that laid the blocks out.
"""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def forward(x):
    world = dist.get_world_size()
    tokens, heads, dim = x.shape
    stacked = torch.cat(torch.split(x, heads // world, dim=1), dim=0)
    exchanged = stacked  # the bug: the exchange was dropped here
    return exchanged.reshape(tokens * world, heads // world, dim)


def example_inputs():
    return (torch.randn(8, 4, 2),)
