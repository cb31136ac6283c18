"""A sequence-to-head reshard: each rank holds its tokens of every head and ends with every token of its
heads (t8 twin cases).  ``x`` is the rank's block of tokens (``--expect x=Shard(0)``); the output is its
block of heads (``--expect out=Shard(1)``).

violations: the exchange is replaced by a copy of the rank's own blocks into the buffer (the line marked
'the bug'): every rank ends with its own tokens only; named at the copy, not at the layout above it.
"""
import torch
import torch.distributed as dist


def forward(x):
    world = dist.get_world_size()
    tokens, heads, dim = x.shape
    blocks = x.reshape(tokens, world, heads // world, dim).transpose(0, 1).contiguous()
    exchanged = torch.empty_like(blocks)
    exchanged.copy_(blocks)  # the bug: a local copy where the exchange was
    return exchanged.reshape(tokens * world, heads // world, dim)


def example_inputs():
    return (torch.randn(8, 4, 2),)
