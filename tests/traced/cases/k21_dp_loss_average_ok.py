"""A data-parallel mean loss: each rank's mean over its share of the batch, summed over the ranks and
divided by their number (the twin of k21_dp_loss_average_bug.py)."""
import torch
import torch.distributed as dist


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    err = x.chunk(world, dim=0)[rank] @ w - target.chunk(world, dim=0)[rank]
    loss = (err * err).mean(dim=0)
    dist.all_reduce(loss, op=dist.ReduceOp.SUM)
    return loss / world


def example_inputs():
    return (torch.randn(8, 6, requires_grad=False), torch.randn(8, 4, requires_grad=False),
            torch.randn(6, 4, requires_grad=False))
