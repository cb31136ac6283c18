"""Bug: a data-parallel loss summed with ``dist.all_reduce``, which records no backward: the forward is
the global mean, but w's gradient stays each rank's own batch rows' (DDP would have summed it)."""
import torch
import torch.distributed as dist

BATCH, FEATURES, OUT = 8, 6, 4


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    err = x.chunk(world, dim=0)[rank] @ w
    loss = (err * err).mean(dim=0) / world
    dist.all_reduce(loss)
    return loss


def example_inputs():
    return torch.randn(BATCH, FEATURES), torch.randn(FEATURES, OUT)
