"""As k6_reduced_buffer_view_bug.py, but each rank adds only its slice of the contraction, so the
all-reduced buffer, read through its view, is the single-device product.

Expected: verified; gloo: outputs match.
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 4, 4


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    buffer = torch.zeros(ROWS * HIDDEN)
    total = buffer.view(ROWS, HIDDEN)
    total.add_(x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank])
    dist.all_reduce(buffer)
    return total


def example_inputs():
    return torch.randn(ROWS, HIDDEN).requires_grad_(False), torch.randn(HIDDEN, HIDDEN).requires_grad_(False)
