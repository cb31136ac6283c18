"""Bug: the tensor-parallel MLP of tp_mlp_fixed.py with its input copied into the region twice, on a line of
its own as picotron writes it, so the input's gradient is all-reduced twice."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 4, 8, 16


class CopyToRegion(torch.autograd.Function):
    """Identity forward; the input's gradient is summed over the ranks."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        dist.all_reduce(grad_output)
        return grad_output


class ReduceFromRegion(torch.autograd.Function):
    """Partial sums added up over the ranks; identity backward."""

    @staticmethod
    def forward(ctx, x):
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    x = CopyToRegion.apply(CopyToRegion.apply(x))
    h = F.gelu(x @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    return ReduceFromRegion.apply(y)


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)
