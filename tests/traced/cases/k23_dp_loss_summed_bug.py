"""k22_dp_loss_not_averaged_ok.py without the division: the ranks' mean losses are all-reduced and handed
back summed, the world size times one device's loss.  Named at the all-reduce, where the values first go
wrong; the repair goes where its result is read next, the return, which divides it by the world size."""
import torch
import torch.distributed as dist


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    pred = x.chunk(world, dim=0)[rank] @ w
    loss = torch.nn.functional.mse_loss(pred, target.chunk(world, dim=0)[rank])
    reported = loss.detach().clone()
    dist.all_reduce(reported)
    return reported  # the bug: the sum of the ranks' means, not their average


def example_inputs():
    return (torch.randn(8, 6, requires_grad=False), torch.randn(8, 4, requires_grad=False),
            torch.randn(6, 4, requires_grad=False))
