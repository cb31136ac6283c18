"""A tensor-parallel MLP whose constructor takes a config object: verify-agent cannot build it alone.

Nothing says what ``config`` is (no type hint, no example_module()), so the traced frontend cannot
construct ``ParallelMLP``.  With an LLM endpoint (or the answer recorded in ``llm-answers/``), a model
writes a harness that builds ``MLPConfig`` and the input; the verdict is the traced run of this code.
Expected: verified.
"""
import torch
import torch.distributed as dist


class MLPConfig:
    def __init__(self, hidden, ffn):
        self.hidden = hidden
        self.ffn = ffn


class _CopyToParallel(torch.autograd.Function):
    """Identity forward; the input's gradient is summed over the ranks in backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class _ReduceFromParallel(torch.autograd.Function):
    """The ranks' partial sums added in forward; the gradient passes through."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ParallelMLP(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        world, rank = dist.get_world_size(), dist.get_rank()
        up = torch.randn(config.ffn, config.hidden)
        down = torch.randn(config.hidden, config.ffn)
        self.up = torch.nn.Parameter(up.chunk(world, 0)[rank].clone())
        self.down = torch.nn.Parameter(down.chunk(world, 1)[rank].clone())

    def forward(self, x):
        x = _CopyToParallel.apply(x)
        h = torch.relu(x @ self.up.t())
        return _ReduceFromParallel.apply(h @ self.down.t())
