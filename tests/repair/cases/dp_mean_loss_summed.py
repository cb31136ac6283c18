"""Bug: the data-parallel mean-squared error of examples/models/dist_dp_mean_loss_ok.py (its twin) whose
local means are summed with an in-place all-reduce and never divided by the number of shards."""
import torch
import torch.distributed as dist

BATCH, FEATURES, OUT = 8, 16, 4


def example_inputs():
    # forward only: a plain dist.all_reduce carries no gradient (DDP reduces the gradients in training),
    # so the inputs are stated not trainable
    return (torch.randn(BATCH, FEATURES, requires_grad=False), torch.randn(BATCH, OUT, requires_grad=False),
            torch.randn(FEATURES, OUT, requires_grad=False))


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    err = x.chunk(world, dim=0)[rank] @ w - target.chunk(world, dim=0)[rank]
    loss = (err * err).mean(dim=0)
    dist.all_reduce(loss)
    return loss
