"""Fully sharded data parallelism written by hand: each rank keeps a block of the weight's rows, the
forward all-gathers the whole weight and the backward reduce-scatters (sums) its gradient back to the
blocks.  Each rank's loss is the mean over its own part of the batch; the global loss is their average,
made by an all-reduce whose backward passes the gradient on unchanged, as if each rank's loss were
the whole loss.

violations (backward): the averaging all-reduce's backward does not divide by the world size
"""
import torch
import torch.distributed as dist
import torch.nn as nn

BATCH, DIM_IN, DIM_OUT = 8, 6, 4


class GatherWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, shard):
        parts = [torch.empty_like(shard) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, shard.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, g):
        world = dist.get_world_size()
        out = torch.empty_like(g.chunk(world)[0])
        dist.reduce_scatter(out, [c.contiguous() for c in g.chunk(world)])
        return out


class AverageOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss):
        loss = loss.clone()
        dist.all_reduce(loss)
        return loss / dist.get_world_size()

    @staticmethod
    def backward(ctx, g):
        return g


class ShardedLinear(nn.Module):
    def __init__(self):
        super().__init__()
        rank, world = dist.get_rank(), dist.get_world_size()
        full = nn.Linear(DIM_IN, DIM_OUT, bias=False).weight.detach()   # seeded: the same on every rank
        rows = DIM_OUT // world
        self.shard = nn.Parameter(full[rank * rows:(rank + 1) * rows].clone())

    def forward(self, x, y):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = BATCH // world
        x, y = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
        weight = GatherWeight.apply(self.shard)
        return AverageOverRanks.apply(((x @ weight.T - y) ** 2).mean())


def example_module():
    return ShardedLinear()


def example_inputs():
    return torch.randn(BATCH, DIM_IN), torch.randn(BATCH, DIM_OUT)
