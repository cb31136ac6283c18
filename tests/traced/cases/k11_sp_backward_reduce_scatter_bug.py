"""Sequence-parallel attention and MLP, megatron-style: each column-parallel layer gathers the sequence in its
forward and reduce-scatters its input gradient in its backward, through one autograd Function (one line runs
every layer's reduce-scatter); the attention scores are masked in place.  The bug: the backward's
reduce-scatter takes the MAX of the ranks' partial gradients instead of their SUM; a greedy walk back from the wrong
gradient ended at a view autograd made for the in-place mask (`as_strided`, at the `masked_fill_` line)."""
import torch
import torch.distributed as dist


class GatherFromSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty((x.shape[0] * dist.get_world_size(),) + tuple(x.shape[1:]))
        dist.all_gather_into_tensor(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty((grad.shape[0] // dist.get_world_size(),) + tuple(grad.shape[1:]))
        dist.reduce_scatter_tensor(out, grad.contiguous(), op=dist.ReduceOp.MAX)  # the bug: MAX, not SUM
        return out


class ReduceScatterToSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty((x.shape[0] // dist.get_world_size(),) + tuple(x.shape[1:]))
        dist.reduce_scatter_tensor(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty((grad.shape[0] * dist.get_world_size(),) + tuple(grad.shape[1:]))
        dist.all_gather_into_tensor(out, grad.contiguous())
        return out


class GatherOutput(GatherFromSequence):
    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size())[dist.get_rank()].contiguous()


def column(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    return GatherFromSequence.apply(x) @ w.chunk(world, dim=1)[rank]


def row(h, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    return ReduceScatterToSequence.apply(h @ w.chunk(world, dim=0)[rank])


def forward(x, w_q, w_k, w_proj, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    x = x.chunk(world)[rank]
    q, k = column(x, w_q), column(x, w_k)
    q, k = q.view(q.shape[0], -1, 2), k.view(k.shape[0], -1, 2)
    scores = torch.einsum("shd,thd->hst", q, k)
    scores.masked_fill_(torch.ones(q.shape[0], q.shape[0]).triu(1).bool(), -1e4)
    attended = torch.einsum("hst,thd->shd", scores.softmax(dim=-1), k)
    h = x + row(attended.reshape(attended.shape[0], -1), w_proj)
    return GatherOutput.apply(h + row(torch.nn.functional.gelu(column(h, w_up)), w_down))


def example_inputs():
    return (torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True),
            torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True),
            torch.randn(8, 16, requires_grad=True), torch.randn(16, 8, requires_grad=True))
