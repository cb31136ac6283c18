"""A hand-sharded MLP (s1 twin cases).

violations: w_up is cut along its input dim (the line marked 'the bug'), so the rank's matmul two lines
below raises (mat1 and mat2 shapes cannot be multiplied) where one device runs; the violation names
the line that made the shape, not the matmul that could not take it.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    w_up_shard = torch.chunk(w_up, world, dim=1)[rank]  # the bug: cut along the contracted dim
    w_down_shard = torch.chunk(w_down, world, dim=1)[rank]
    h = F.gelu(x @ w_up_shard.t())
    y = h @ w_down_shard.t()
    dist.all_reduce(y)
    return y


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(16, 8), torch.randn(8, 16)
