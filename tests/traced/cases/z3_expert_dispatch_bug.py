"""Expert parallelism: top-1 routing by argmax, tokens sorted by expert and exchanged with
all_to_all_single whose split sizes the code reads into Python (the routing steers the path), the
local experts applied, the tokens sent back and unsorted.  The received tokens' experts are counted from 0
on every rank instead of from the rank's first expert.

violations
"""
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dfn

TOKENS, DIM, EXPERTS = 8, 2, 4


class GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, g):
        return g.chunk(dist.get_world_size())[dist.get_rank()].contiguous()


def forward(x, router, experts):
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = EXPERTS // world
    n = TOKENS // world
    local = x[rank * n:(rank + 1) * n]
    choice = (local @ router).argmax(-1)
    order = choice.argsort(stable=True)
    counts = torch.bincount(choice, minlength=EXPERTS)
    send_counts = counts.view(world, per_rank).sum(1)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    send = local[order]
    recv = dfn.all_to_all_single(torch.empty(int(recv_counts.sum()), DIM), send,
                                 output_split_sizes=recv_counts.tolist(),
                                 input_split_sizes=send_counts.tolist())
    expert_counts = torch.empty(world * per_rank, dtype=torch.long)
    dist.all_to_all_single(expert_counts, counts)
    expert_of = torch.repeat_interleave(torch.arange(per_rank).repeat(world), expert_counts)  # the bug
    out = torch.stack([recv[i] @ experts[e] for i, e in enumerate(expert_of.tolist())]) if len(expert_of) \
        else recv
    back = dfn.all_to_all_single(torch.empty(n, DIM), out,
                                 output_split_sizes=send_counts.tolist(),
                                 input_split_sizes=recv_counts.tolist())
    result = torch.empty_like(back)
    result[order] = back
    return GatherRows.apply(result)


def example_inputs():
    return torch.randn(TOKENS, DIM, requires_grad=True), torch.randn(DIM, EXPERTS, requires_grad=True), torch.randn(EXPERTS, DIM, DIM, requires_grad=True)
