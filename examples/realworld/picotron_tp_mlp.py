"""picotron-style explicit tensor parallelism: a process-group manager and custom autograd Functions.

A global `ProcessGroupManager` holds the tensor-parallel group (`pgm.tp_group`) and reads its
size and rank from the group object (`group.size()`, `group.rank()`).  Communication is in
custom `torch.autograd.Function`s: `CopyToModelParallelRegion` (identity forward, all-reduce
backward) before the column-parallel layer and `ReduceFromModelParallelRegion` (all-reduce
forward, identity backward) after the row-parallel layer.  Each layer initialises one master
weight and keeps its rank's slice.

verified
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SEQ, BATCH, HIDDEN, FFN = 12, 2, 16, 40


class ProcessGroupManager:
    def __init__(self, tp_size: int):
        self.global_rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.tp_group = dist.new_group(list(range(tp_size)))
        self.tp_world_size = self.tp_group.size()
        self.tp_rank = self.tp_group.rank()


pgm = None


def setup_process_group_manager(tp_size: int):
    global pgm
    pgm = ProcessGroupManager(tp_size)


class CopyToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        if pgm.tp_world_size == 1:
            return grad_output
        dist.all_reduce(grad_output, op=dist.ReduceOp.SUM, group=pgm.tp_group)
        return grad_output


class ReduceFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if pgm.tp_world_size == 1:
            return x
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=pgm.tp_group)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ColumnParallelLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.tp_world_size, self.tp_rank = pgm.tp_world_size, pgm.tp_rank
        self.output_size_per_partition = out_features // self.tp_world_size
        master_weight = torch.empty(out_features, in_features)
        nn.init.kaiming_uniform_(master_weight, a=5 ** 0.5)
        start = self.tp_rank * self.output_size_per_partition
        self.weight = nn.Parameter(master_weight[start:start + self.output_size_per_partition].clone())
        self.bias = nn.Parameter(torch.zeros(self.output_size_per_partition))

    def forward(self, x):
        x = CopyToModelParallelRegion.apply(x)
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.tp_world_size, self.tp_rank = pgm.tp_world_size, pgm.tp_rank
        self.input_size_per_partition = in_features // self.tp_world_size
        master_weight = torch.empty(out_features, in_features)
        nn.init.kaiming_uniform_(master_weight, a=5 ** 0.5)
        start = self.tp_rank * self.input_size_per_partition
        self.weight = nn.Parameter(master_weight[:, start:start + self.input_size_per_partition].clone())
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x):
        partial = F.linear(x, self.weight)
        return ReduceFromModelParallelRegion.apply(partial) + self.bias


class TensorParallelMLP(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.up_proj = ColumnParallelLinear(hidden, ffn)
        self.down_proj = RowParallelLinear(ffn, hidden)

    def forward(self, x):
        return self.down_proj(F.gelu(self.up_proj(x)))


def example_module():
    setup_process_group_manager(tp_size=dist.get_world_size())
    return TensorParallelMLP(HIDDEN, FFN)


def example_inputs():
    return (torch.randn(BATCH, SEQ, HIDDEN, requires_grad=True),)
