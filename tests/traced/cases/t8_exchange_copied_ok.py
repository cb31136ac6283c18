"""A sequence-to-head reshard: each rank holds its tokens of every head and ends with every token of its
heads (t8 twin cases).  ``x`` is the rank's block of tokens (``--expect x=Shard(0)``); the output is its
block of heads (``--expect out=Shard(1)``).

ok: the blocks laid out per destination rank are exchanged by ``all_to_all_single`` into a fresh buffer.
"""
import torch
import torch.distributed as dist


def forward(x):
    world = dist.get_world_size()
    tokens, heads, dim = x.shape
    blocks = x.reshape(tokens, world, heads // world, dim).transpose(0, 1).contiguous()
    exchanged = torch.empty_like(blocks)
    dist.all_to_all_single(exchanged, blocks)
    return exchanged.reshape(tokens * world, heads // world, dim)


def example_inputs():
    return (torch.randn(8, 4, 2),)
