"""Expert parallelism without an all-to-all: every rank sees every token, routes it to its top two
experts by the router's softmax, renormalises the gate weights over the chosen experts it owns, runs
only the tokens routed to the experts it owns (found with nonzero: sizes read from the routing), adds
their weighted outputs into its partial result, and the partial results are summed over the ranks (the
tokens and the router enter through an identity whose backward sums the ranks' partial gradients).

violations (forward): the gate weights renormalised over the chosen experts of the rank, not both
"""
import torch
import torch.distributed as dist


class CopyToRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


class SumOverRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


TOKENS, DIM, EXPERTS = 6, 3, 4


def forward(x, router, experts):
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = EXPERTS // world
    x, router = CopyToRanks.apply(x), CopyToRanks.apply(router)
    gates = torch.softmax(x @ router, dim=-1)
    top, chosen = gates.topk(2, dim=-1)
    mine = (chosen >= rank * per_rank) & (chosen < (rank + 1) * per_rank)
    top = top / (top * mine).sum(dim=-1, keepdim=True).clamp_min(1e-9)
    out = torch.zeros_like(x)
    for e in range(rank * per_rank, (rank + 1) * per_rank):
        hit = chosen == e
        rows = hit.any(dim=-1).nonzero().squeeze(-1)
        if len(rows) == 0:
            continue
        weight = (top * hit).sum(dim=-1)[rows]
        out = out.index_add(0, rows, weight[:, None] * (x[rows] @ experts[e]))
    return SumOverRanks.apply(out)


def example_inputs():
    return (torch.randn(TOKENS, DIM, requires_grad=True), torch.randn(DIM, EXPERTS, requires_grad=True),
            torch.randn(EXPERTS, DIM, DIM, requires_grad=True))
