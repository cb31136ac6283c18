"""A data-parallel step's reported loss: each rank's mean loss, averaged over the ranks (the twin of
k22_dp_loss_not_averaged_bug.py)."""
import torch
import torch.distributed as dist


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    pred = x.chunk(world, dim=0)[rank] @ w
    loss = torch.nn.functional.mse_loss(pred, target.chunk(world, dim=0)[rank])
    reported = loss.detach().clone()
    dist.all_reduce(reported)
    return reported / world


def example_inputs():
    return (torch.randn(8, 6, requires_grad=False), torch.randn(8, 4, requires_grad=False),
            torch.randn(6, 4, requires_grad=False))
