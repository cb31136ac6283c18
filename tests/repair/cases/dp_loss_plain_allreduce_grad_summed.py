"""The data-parallel loss of dp_loss_plain_allreduce_grad_local.py with w guarded: identity forward, its
gradient summed over the ranks (what DDP does for a replicated parameter)."""
import torch
import torch.distributed as dist

BATCH, FEATURES, OUT = 8, 6, 4


class _CopyToRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.clone()
        dist.all_reduce(grad_output)
        return grad_output


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    err = x.chunk(world, dim=0)[rank] @ _CopyToRanks.apply(w)
    loss = (err * err).mean(dim=0) / world
    dist.all_reduce(loss)
    return loss


def example_inputs():
    return torch.randn(BATCH, FEATURES), torch.randn(FEATURES, OUT)
