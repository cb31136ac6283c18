"""torchtitan-style transformer block slice with sequence parallelism on a 1-D TP mesh.

The norm runs on sequence shards (`SequenceParallel`), `PrepareModuleInput` turns the
sequence-sharded input of the feed-forward into a replicated DTensor (an all-gather), the
up projection is ColwiseParallel and the down projection RowwiseParallel with
`output_layouts=Shard(1)` (a reduce-scatter back to sequence shards).  The block's input
is distributed as Shard(1) and its output is gathered with `full_tensor()`.

verified
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

BATCH, SEQ, DIM, HIDDEN = 2, 12, 16, 40


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN)
        self.w2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ffn_norm = nn.LayerNorm(DIM)
        self.feed_forward = FeedForward()

    def forward(self, x):
        return x + self.feed_forward(self.ffn_norm(x))


def build(mesh):
    block = Block()
    plan = {
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
    }
    parallelize_module(block, mesh, plan)

    def run(x):
        x = distribute_tensor(x, mesh, [Shard(1)])
        return block(x).full_tensor()

    return run


def example_inputs():
    return (torch.randn(BATCH, SEQ, DIM, requires_grad=True),)
