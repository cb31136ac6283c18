"""nanotron-style row-parallel linear with a `world_size == 1` fast path that forgets the bias.

With a tensor-parallel group of one rank there is nothing to reduce, so the author returns
`F.linear(x, self.weight)` early, and the bias is lost.  Runs on 2 or 4 ranks take the
all-reduce path and add it.  The single-device program and the parallel program disagree by
the bias.

violations
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SEQ, BATCH, HIDDEN, FFN = 12, 2, 16, 40


class DifferentiableAllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, group):
        tensor = tensor.clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class DifferentiableIdentity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.clone()
        dist.all_reduce(grad_output, op=dist.ReduceOp.SUM, group=ctx.group)
        return grad_output, None


class TensorParallelColumnLinear(nn.Module):
    def __init__(self, in_features, out_features, pg):
        super().__init__()
        self.pg = pg
        self.weight = nn.Parameter(torch.randn(out_features // pg.size(), in_features) / in_features ** 0.5)

    def forward(self, x):
        return F.linear(DifferentiableIdentity.apply(x, self.pg), self.weight)


class TensorParallelRowLinear(nn.Module):
    def __init__(self, in_features, out_features, pg):
        super().__init__()
        self.pg = pg
        self.world_size = pg.size()
        self.weight = nn.Parameter(torch.randn(out_features, in_features // self.world_size) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        if self.world_size == 1:
            return F.linear(x, self.weight)
        out = DifferentiableAllReduceSum.apply(F.linear(x, self.weight), self.pg)
        return out + self.bias


class MLP(nn.Module):
    def __init__(self, tp_pg):
        super().__init__()
        self.up = TensorParallelColumnLinear(HIDDEN, FFN, tp_pg)
        self.down = TensorParallelRowLinear(FFN, HIDDEN, tp_pg)

    def forward(self, x):
        return self.down(F.silu(self.up(x)))


def example_module():
    return MLP(dist.new_group(list(range(dist.get_world_size()))))


def example_inputs():
    return (torch.randn(BATCH, SEQ, HIDDEN, requires_grad=True),)
