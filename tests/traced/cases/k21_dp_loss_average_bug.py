"""k21_dp_loss_average_ok.py reducing with MAX: each rank's mean over its share of the batch is right (the
ranks' means average to the single device's), so the values first go wrong at the all-reduce, not at
the mean (where they were named: a rank's mean is neither the single device's nor a term of its sum)."""
import torch
import torch.distributed as dist


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    err = x.chunk(world, dim=0)[rank] @ w - target.chunk(world, dim=0)[rank]
    loss = (err * err).mean(dim=0)
    dist.all_reduce(loss, op=dist.ReduceOp.MAX)  # the bug: MAX, where the ranks' means are to be summed
    return loss / world


def example_inputs():
    return (torch.randn(8, 6, requires_grad=False), torch.randn(8, 4, requires_grad=False),
            torch.randn(6, 4, requires_grad=False))
