"""Ulysses attention whose v is cut along the heads instead of the sequence: the ranks raise in the attention's
second product.  The all-to-all's reshapes have other numbers of dims than the single device's values, which
say nothing of where the shape went wrong: the raise is named, not q's all-to-all (as a first cut of the
non-block walk did)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from yunchang.comm.all_to_all import SeqAllToAll4D

BATCH, SEQ, HEADS, DIM = 1, 8, 4, 4


class GatherSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, local):
        pieces = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, local.contiguous())
        return torch.cat(pieces, dim=1)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=1)[dist.get_rank()]


def forward(q, k, v):
    world, rank = dist.get_world_size(), dist.get_rank()
    group = dist.group.WORLD
    q_local = q.chunk(world, dim=1)[rank]
    k_local = k.chunk(world, dim=1)[rank]
    v_local = v.chunk(world, dim=2)[rank]  # the bug: dim=2, not dim=1
    q_heads = SeqAllToAll4D.apply(group, q_local, 2, 1, False)
    k_heads = SeqAllToAll4D.apply(group, k_local, 2, 1, False)
    v_heads = SeqAllToAll4D.apply(group, v_local, 2, 1, False)
    context = F.scaled_dot_product_attention(q_heads.transpose(1, 2), k_heads.transpose(1, 2),
                                             v_heads.transpose(1, 2), is_causal=True)
    out_local = SeqAllToAll4D.apply(group, context.transpose(1, 2).contiguous(), 1, 2, False)
    return GatherSequence.apply(out_local)


def example_inputs():
    return (torch.randn(BATCH, SEQ, HEADS, DIM, requires_grad=True),
            torch.randn(BATCH, SEQ, HEADS, DIM, requires_grad=True),
            torch.randn(BATCH, SEQ, HEADS, DIM, requires_grad=True))
