"""Pattern 9: a custom backward the static reader cannot translate (a sort).

Megatron's f and g operators written by hand as torch.autograd.Function; f's backward
sorts the reduced gradient, which no IR op models.  Deriving the gradients from the forward
instead would check some other backward: the verdict must say the backward was not checked.

CopyToTensorParallel (f) is the identity forward and all-reduces the gradient backward;
ReduceFromTensorParallel (g) all-reduces forward and is the identity backward.  Around
them: a column-parallel up projection, GELU, a row-parallel down projection.  Every
rank ends with the full gradient of the replicated input x.

Expected: unsupported (backward at line 30 not checked; forward proven)
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 8, 16, 32


class CopyToTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad.sort(dim=0).values


class ReduceFromTensorParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = CopyToTensorParallel.apply(x) @ w_up.chunk(world, dim=1)[rank]
    y = F.gelu(h) @ w_down.chunk(world, dim=0)[rank]
    return ReduceFromTensorParallel.apply(y)
