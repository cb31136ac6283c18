"""As k4_reduce_forward_ok.py, with the all-reduce missing from the forward of the file's reduce from the
parallel region: ``_reduce`` hands the rank's partial sum back as it was given it.

violations (forward): every rank's output is its partial sum only; named where the all-reduce belongs (the
line marked 'the bug', the statement before ``_reduce``'s return), also its repair line.
"""
import torch
import torch.distributed as dist


def _reduce(x):
    group = dist.group.WORLD   # the bug: the all-reduce of x over the group belongs after this line
    return x


class CopyToRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class ReduceFromRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _reduce(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    w_up_shard = torch.chunk(w_up, world, dim=0)[rank]
    w_down_shard = torch.chunk(w_down, world, dim=1)[rank]
    h = torch.tanh(CopyToRanks.apply(x) @ w_up_shard.t())
    return ReduceFromRanks.apply(h @ w_down_shard.t())


def example_inputs():
    return torch.randn(4, 8), torch.randn(16, 8), torch.randn(8, 16)
