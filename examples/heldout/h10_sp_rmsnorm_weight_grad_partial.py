"""Sequence-parallel RMSNorm: each rank normalises its slice of the sequence; the replicated weight's
gradient is summed over the ranks by a hook; the output is gathered along the sequence with a gather
whose backward keeps the rank's slice.

violations (backward): no hook: each rank keeps its own share of the weight's gradient
"""
import torch
import torch.distributed as dist
import torch.nn as nn

SEQ, DIM = 8, 6


class GatherSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        world = dist.get_world_size()
        parts = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(parts, t.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, g):
        rank, world = dist.get_rank(), dist.get_world_size()
        return g.chunk(world, dim=0)[rank].contiguous()


def _sum_over_ranks(g):
    g = g.clone()
    dist.all_reduce(g)
    return g


class SPRMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(DIM) + 0.1 * torch.randn(DIM))

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = SEQ // world
        local = x[rank * n:(rank + 1) * n]
        y = local * torch.rsqrt(local.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return GatherSeq.apply(y)


def example_module():
    return SPRMSNorm()


def example_inputs():
    return (torch.randn(SEQ, DIM, requires_grad=True),)
