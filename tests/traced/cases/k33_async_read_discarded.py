"""Twin of k27_async_wait_dropped_bug.py whose early read does not reach the result: the sum is read while
the asynchronous all-reduce may still be writing it, but only multiplied by zero, and the wait comes before the
sum is used.  Torch, with the all-reduce's result written only at its wait(), computes what one device does:
by the recorded ops a race, by torch no difference - not a violation."""
import torch
import torch.distributed as dist


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    handle = dist.all_reduce(y, async_op=True)
    early = y * 0.0  # read before the wait, discarded by the product
    handle.wait()
    return y + early


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, 8, requires_grad=False)
