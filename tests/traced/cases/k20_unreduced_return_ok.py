"""A row-parallel matmul whose partial sums are all-reduced before they are returned (the twin of
k20_unreduced_return_bug.py)."""
import torch
import torch.distributed as dist


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, 6, requires_grad=False)
