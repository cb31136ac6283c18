"""picotron-style column-parallel layer with `gather_output`: the all-gather concatenates on the wrong dim.

The layer splits its output features over the tensor-parallel group and, with
`gather_output=True`, gathers the full feature dim through a custom autograd Function.
The gather concatenates the rank pieces along dim 0 (batch) instead of the last dim; the
caller reshapes to `(batch, seq, features)`, which fits the element count, so nothing fails
and the features are scrambled across batch rows.

violations
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SEQ, BATCH, HIDDEN, FFN = 12, 2, 16, 40


class ProcessGroupManager:
    def __init__(self):
        self.tp_group = dist.new_group(list(range(dist.get_world_size())))
        self.tp_world_size = self.tp_group.size()
        self.tp_rank = self.tp_group.rank()


pgm = None


class CopyToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        if pgm.tp_world_size > 1:
            dist.all_reduce(grad_output, group=pgm.tp_group)
        return grad_output


class GatherFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if pgm.tp_world_size == 1:
            return x
        pieces = [torch.empty_like(x) for _ in range(pgm.tp_world_size)]
        dist.all_gather(pieces, x.contiguous(), group=pgm.tp_group)
        return torch.cat(pieces, dim=0)

    @staticmethod
    def backward(ctx, grad_output):
        if pgm.tp_world_size == 1:
            return grad_output
        return grad_output.chunk(pgm.tp_world_size, dim=0)[pgm.tp_rank].contiguous()


class ColumnParallelLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, gather_output: bool = False):
        super().__init__()
        self.gather_output = gather_output
        per_partition = out_features // pgm.tp_world_size
        master_weight = torch.randn(out_features, in_features) / in_features ** 0.5
        start = pgm.tp_rank * per_partition
        self.weight = nn.Parameter(master_weight[start:start + per_partition].clone())

    def forward(self, x):
        out = F.linear(CopyToModelParallelRegion.apply(x), self.weight)
        return GatherFromModelParallelRegion.apply(out) if self.gather_output else out


class Projection(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = ColumnParallelLinear(HIDDEN, FFN, gather_output=True)

    def forward(self, x):
        batch, seq, _ = x.shape
        return torch.relu(self.proj(x)).view(batch, seq, -1)


def example_module():
    global pgm
    pgm = ProcessGroupManager()
    return Projection()


def example_inputs():
    return (torch.randn(BATCH, SEQ, HIDDEN, requires_grad=True),)
