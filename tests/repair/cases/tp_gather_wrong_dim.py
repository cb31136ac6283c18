"""Bug: the gathered pieces are concatenated along the token dim (its backward splits the same wrong dim)."""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, FFN = 4, 8, 12


class CopyToRegion(torch.autograd.Function):
    """Identity forward; the gradient is summed over the ranks."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        dist.all_reduce(grad_output)
        return grad_output


class GatherFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, x.contiguous())
        return torch.cat(pieces, dim=0)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.chunk(dist.get_world_size(), dim=0)[dist.get_rank()].contiguous()


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    local = CopyToRegion.apply(x) @ w.chunk(world, dim=1)[rank]
    return torch.relu(GatherFromRegion.apply(local))


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN)
