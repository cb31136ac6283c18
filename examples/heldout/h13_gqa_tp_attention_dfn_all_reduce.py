"""Head-parallel attention with grouped KV heads: each rank takes its query heads and the KV head
they share (replicated when there are more ranks than KV heads); the output projection is row
parallel and summed.

violations (backward): torch.distributed.nn.functional.all_reduce's backward sums the replicated output's gradient over the ranks
"""
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dfn

SEQ, DIM, HEADS, KV_HEADS, HEAD_DIM = 5, 8, 4, 2, 3


def forward(x, wq, wk, wv, wo):
    rank, world = dist.get_rank(), dist.get_world_size()
    q_per_rank = HEADS // world
    group = HEADS // KV_HEADS
    out = 0
    for h in range(rank * q_per_rank, (rank + 1) * q_per_rank):
        kv = h // group
        q = x @ wq[:, h * HEAD_DIM:(h + 1) * HEAD_DIM]
        k = x @ wk[:, kv * HEAD_DIM:(kv + 1) * HEAD_DIM]
        v = x @ wv[:, kv * HEAD_DIM:(kv + 1) * HEAD_DIM]
        att = (q @ k.T / HEAD_DIM ** 0.5).softmax(-1)
        out = out + (att @ v) @ wo[h * HEAD_DIM:(h + 1) * HEAD_DIM]
    return dfn.all_reduce(out)


def example_inputs():
    return (torch.randn(SEQ, DIM, requires_grad=True), torch.randn(DIM, HEADS * HEAD_DIM, requires_grad=True), torch.randn(DIM, KV_HEADS * HEAD_DIM, requires_grad=True),
            torch.randn(DIM, KV_HEADS * HEAD_DIM, requires_grad=True), torch.randn(HEADS * HEAD_DIM, DIM, requires_grad=True))
