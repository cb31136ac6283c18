"""Context-parallel causal attention with rotary embeddings: each rank holds a contiguous slice of
the sequence, rotates its queries and keys by their positions in the whole sequence, gathers the
keys and values of every rank (the gather's backward sums the gradients of every rank's queries
into the keys' owner), masks by global positions and gathers the output.

verified: rotary positions are the rank's offset plus the local index
"""
import torch
import torch.distributed as dist
import torch.nn as nn

SEQ, DIM = 8, 4


def _gather(t):
    world = dist.get_world_size()
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=0)


class GatherKV(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return _gather(t)

    @staticmethod
    def backward(ctx, g):
        rank, world = dist.get_rank(), dist.get_world_size()
        g = g.contiguous().clone()
        dist.all_reduce(g)
        return g.chunk(world, dim=0)[rank].contiguous()


class GatherOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return _gather(t)

    @staticmethod
    def backward(ctx, g):
        rank, world = dist.get_rank(), dist.get_world_size()
        return g.chunk(world, dim=0)[rank].contiguous()


def _sum_over_ranks(g):
    g = g.clone()
    dist.all_reduce(g)
    return g


def rotate(x, positions):
    half = DIM // 2
    freqs = 1.0 / (100.0 ** (torch.arange(half, dtype=torch.float32) / half))
    angles = positions[:, None].to(torch.float32) * freqs[None, :]
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[:, :half], x[:, half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class RotaryAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(DIM, DIM, bias=False)
        self.k = nn.Linear(DIM, DIM, bias=False)
        self.v = nn.Linear(DIM, DIM, bias=False)
        for p in self.parameters():   # every rank's queries use the whole weights: their gradients are summed
            p.register_hook(_sum_over_ranks)

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = SEQ // world
        local = x[rank * n:(rank + 1) * n]
        positions = rank * n + torch.arange(n)
        q = rotate(self.q(local), positions)
        k = GatherKV.apply(rotate(self.k(local), positions))
        v = GatherKV.apply(self.v(local))
        scores = q @ k.T / DIM ** 0.5
        future = torch.arange(SEQ)[None, :] > positions[:, None]
        scores = scores.masked_fill(future, float("-inf"))
        return GatherOut.apply(torch.softmax(scores, dim=-1) @ v)


def example_module():
    return RotaryAttention()


def example_inputs():
    return (torch.randn(SEQ, DIM, requires_grad=True),)
