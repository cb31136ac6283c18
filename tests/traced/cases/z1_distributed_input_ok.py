"""torchtitan style: a tensor-parallel plan built by ``build(mesh)``, and a driver that distributes its
trainable input with ``distribute_tensor`` (which accepts only a leaf) before the block runs.

verified
"""
import torch
import torch.nn as nn
from torch.distributed.tensor import Replicate, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

SEQ, DIM, HIDDEN = 4, 6, 8


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN)
        self.w2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.w2(torch.tanh(self.w1(x)))


def build(mesh):
    block = FeedForward()
    parallelize_module(block, mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel(use_local_output=False)})

    def run(x):
        x = distribute_tensor(x, mesh, [Replicate()])
        return block(x).full_tensor()

    return run


def example_inputs():
    return (torch.randn(SEQ, DIM, requires_grad=True),)
