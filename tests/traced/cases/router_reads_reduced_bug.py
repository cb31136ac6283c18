"""A router that reads values an all-reduce computed: a row-parallel projection, all-reduced, then the
two best rows are picked (``topk``) and ``.item()`` chooses the branch, as mixture-of-experts routers
choose their experts.  The all-reduce takes the maximum of the partial sums instead of their sum.

Expected: violations (the all-reduce line)
"""
import torch
import torch.distributed as dist


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, 6, requires_grad=False)  # forward only


def forward(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    h = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(h, op=dist.ReduceOp.MAX)
    score = h.sum(dim=1)
    best = torch.topk(score, 2).indices
    if score.max().item() > 0:
        return h[best] * 2
    return h[best] * 3
