"""A custom Function that scatters rows and scales them; its backward returns a tuple written over
several lines (b2 twin cases).

violations: the gradient on the line marked 'the bug' has one rank's rows only, which autograd rejects on the
ranks; named at that element of the returned tuple, not at the line the `return` starts on.
"""
import torch
import torch.distributed as dist


def _gathered(grad):
    pieces = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, grad.contiguous())
    return torch.cat(pieces, dim=0)


class GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows):
        return _gathered(rows)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()


class ScaledRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scale, x):
        ctx.scale = scale
        return x.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous() * scale

    @staticmethod
    def backward(ctx, grad):
        return (None,
                grad * ctx.scale)  # the bug: the other ranks' rows are not gathered back


def forward(x):
    rows = torch.tanh(ScaledRows.apply(2.0, x))
    return GatherRows.apply(rows)


def example_inputs():
    return (torch.randn(8, 4),)
