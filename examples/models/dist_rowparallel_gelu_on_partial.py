"""Row-parallel first layer with GELU applied to the partial sums before the all-reduce.

Twin of dist_rowparallel_gelu_ok.py with the all-reduce moved after the activation.

Bug: gelu(a) + gelu(b) != gelu(a + b): a non-linear op consumes a Partial(sum) value.

Expected: violations
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, OUT = 8, 32, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w1, w2):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = x.chunk(world, dim=1)[rank] @ w1.chunk(world, dim=0)[rank]
    h = F.gelu(h)
    dist.all_reduce(h)
    return h @ w2
