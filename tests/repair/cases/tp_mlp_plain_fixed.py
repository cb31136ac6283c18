"""Fixed twin of tp_mlp_plain_missing_allreduce.py: Megatron's region pair (all-reduce forward after the
row-parallel product, all-reduce backward on the replicated input)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 4, 8, 16


class _ReduceFromRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class _CopyToRanks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.clone()
        dist.all_reduce(grad_output)
        return grad_output


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(_CopyToRanks.apply(x) @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    y = _ReduceFromRanks.apply(y)
    return y


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)
