"""k22_dp_loss_not_averaged_ok.py without the all-reduce: each rank reports its own mean loss.  The ranks'
means are right (they average to the single device's); the values first go wrong at the copy handed
back, after which the average belongs (they were named at the loss, a rank's mean being
neither the single device's nor a term of its sum)."""
import torch
import torch.distributed as dist


def forward(x, target, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    pred = x.chunk(world, dim=0)[rank] @ w
    loss = torch.nn.functional.mse_loss(pred, target.chunk(world, dim=0)[rank])
    reported = loss.detach().clone()  # the bug: each rank's own mean, never averaged over the ranks
    return reported


def example_inputs():
    return (torch.randn(8, 6, requires_grad=False), torch.randn(8, 4, requires_grad=False),
            torch.randn(6, 4, requires_grad=False))
