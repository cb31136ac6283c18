"""k20_unreduced_return_ok.py without its all-reduce: the partial sum is returned as it is.  The finding
names the return (where the value is handed back), and the line that made the partial sum as the line
after which the reduction goes."""
import torch
import torch.distributed as dist


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]  # the bug: returned without an all-reduce
    return y


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, 6, requires_grad=False)
