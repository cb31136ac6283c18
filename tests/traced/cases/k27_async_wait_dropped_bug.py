"""Twin of k17_async_average_ok.py without its ``handle.wait()``: the sum is read while the asynchronous
all-reduce may still be writing it.  The finding names the read; the wait belongs right before it, after the
line marked below."""
import torch
import torch.distributed as dist


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    handle = dist.all_reduce(y, async_op=True)
    z = torch.tanh(x)  # the bug: handle.wait() belongs after this line, before y is read
    return y + z


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, 8, requires_grad=False)
