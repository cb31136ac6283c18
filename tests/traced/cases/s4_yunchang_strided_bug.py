"""Ulysses attention with yunchang's SeqAllToAll4D (s4 twin cases): each rank holds a contiguous slice
of the sequence of q, k and v, trades it for a head slice, attends, trades back and gathers.

violations: k's slice is strided (the line marked 'the bug'); yunchang's all-to-all reshapes it where one
device skips the exchange, and the violation names the slice, not the all-to-all that reads it.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from yunchang.comm.all_to_all import SeqAllToAll4D


def forward(q, k, v):
    world, rank = dist.get_world_size(), dist.get_rank()
    group = dist.group.WORLD
    q_local = q.chunk(world, dim=1)[rank]
    k_local = k[:, rank::world]  # the bug: a strided slice of the sequence, not the rank's block
    v_local = v.chunk(world, dim=1)[rank]
    q_heads = SeqAllToAll4D.apply(group, q_local, 2, 1, False)
    k_heads = SeqAllToAll4D.apply(group, k_local, 2, 1, False)
    v_heads = SeqAllToAll4D.apply(group, v_local, 2, 1, False)
    context = F.scaled_dot_product_attention(q_heads.transpose(1, 2), k_heads.transpose(1, 2),
                                             v_heads.transpose(1, 2))
    out_local = SeqAllToAll4D.apply(group, context.transpose(1, 2).contiguous(), 1, 2, False)
    pieces = [torch.empty_like(out_local) for _ in range(world)]
    dist.all_gather(pieces, out_local)
    return torch.cat(pieces, dim=1)


def example_inputs():
    return (torch.randn(1, 8, 4, 4, requires_grad=False), torch.randn(1, 8, 4, 4, requires_grad=False),
            torch.randn(1, 8, 4, 4, requires_grad=False))
