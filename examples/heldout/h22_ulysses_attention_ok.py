"""Ulysses sequence parallelism written with torch.distributed.nn.functional.all_to_all: each rank
holds a slice of the sequence with every head; an all-to-all trades it for the whole sequence with a
group of heads, attention runs per head, and the inverse all-to-all trades back.

verified: the heads are split into contiguous groups on the way in and put back in the same order
"""
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dfn
import torch.nn as nn

SEQ, HEADS, HEAD_DIM = 8, 4, 3


def _sum_over_ranks(g):
    g = g.clone()
    dist.all_reduce(g)
    return g


class GatherSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, g):
        return g.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()


def seq_to_heads(x):
    world = dist.get_world_size()
    sent = [t.contiguous() for t in x.chunk(world, dim=1)]   # one group of heads for each rank
    received = dfn.all_to_all([torch.empty_like(t) for t in sent], sent)
    return torch.cat(received, dim=0)                        # the whole sequence, this rank's heads


def heads_to_seq(x):
    world = dist.get_world_size()
    sent = [t.contiguous() for t in x.chunk(world, dim=0)]   # one slice of the sequence for each rank
    received = dfn.all_to_all([torch.empty_like(t) for t in sent], sent)
    return torch.cat(received, dim=1)                        # this rank's slice, every head


class UlyssesAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HEADS * HEAD_DIM, 3 * HEADS * HEAD_DIM, bias=False)
        self.qkv.weight.register_hook(_sum_over_ranks)

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = SEQ // world
        local = x[rank * n:(rank + 1) * n]
        q, k, v = self.qkv(local).reshape(n, 3, HEADS, HEAD_DIM).unbind(dim=1)
        q, k, v = seq_to_heads(q), seq_to_heads(k), seq_to_heads(v)
        scores = torch.einsum("shd,thd->hst", q, k) / HEAD_DIM ** 0.5
        out = torch.einsum("hst,thd->shd", torch.softmax(scores, dim=-1), v)
        out = heads_to_seq(out).reshape(n, HEADS * HEAD_DIM)
        return GatherSeq.apply(out)


def example_module():
    return UlyssesAttention()


def example_inputs():
    return (torch.randn(SEQ, HEADS * HEAD_DIM, requires_grad=True),)
