"""A tensor-parallel MLP whose down projection is cut along its output dim instead of its input dim: the
ranks raise at the second matmul, between a column-parallel h (a block of the contracted dim, as tensor
parallelism makes it) and a w_down piece the code cut along another dim, holding the contracted dim whole.
The w_down cut is named (on the raising line here); it was named at the w_up cut, the line above."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(x @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=1)[rank]  # the bug: dim=1, not dim=0
    dist.all_reduce(y)
    return y


def example_inputs():
    return (torch.randn(8, 16, requires_grad=False), torch.randn(16, 32, requires_grad=False),
            torch.randn(32, 16, requires_grad=False))
