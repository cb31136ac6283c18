"""A row-parallel linear whose bias its hook moves aside (tests/traced/test_hook_collective_cuts.py).

As transformers' ``RowwiseParallel`` does: on the first call the bias is re-registered as ``_bias``
(``bias`` set to None), the partial product is all-reduced by an autograd Function, then the bias is
added.  The bias's gradient lives on ``_bias`` after the call; ``BIAS_BEFORE_REDUCE`` adds it to each
rank's partial product instead (world times the bias: a violation).
"""
import torch
import torch.distributed as dist
import torch.nn as nn

BIAS_BEFORE_REDUCE = False


class _ReduceForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class _ReduceBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(grad)
        return grad


class RowParallelWithBias(nn.Module):
    def __init__(self):
        super().__init__()
        world = dist.get_world_size() if dist.is_initialized() else 1
        rank = dist.get_rank() if dist.is_initialized() else 0
        torch.manual_seed(0)
        full = nn.Linear(16, 8)
        step = 16 // world
        self.weight = nn.Parameter(full.weight.detach()[:, rank * step:(rank + 1) * step].clone())
        self.bias = nn.Parameter(full.bias.detach().clone())

    def forward(self, x):
        if self.bias is not None:
            self._bias, self.bias = self.bias, None
        world = dist.get_world_size() if dist.is_initialized() else 1
        rank = dist.get_rank() if dist.is_initialized() else 0
        piece = _ReduceBackward.apply(x).chunk(world, dim=-1)[rank]
        out = piece @ self.weight.t()
        if BIAS_BEFORE_REDUCE:
            out = out + self._bias
        out = _ReduceForward.apply(out)
        if not BIAS_BEFORE_REDUCE:
            out = out + self._bias
        return torch.tanh(out) + x[..., :8]


def example_inputs():
    return (torch.randn(4, 16),)
