"""DTensor plan whose colwise layer hands a plain local tensor to a softmax over the hidden dim.

ColwiseParallel() defaults to use_local_output=True: `self.up(x)` is this rank's
HIDDEN/world slice as a plain tensor, and the module's softmax over the last dim runs on
that slice.

Bug: an op over the sharded dim applied to the local output (softmax normalises each
rank's slice separately); DTensor cannot redistribute a plain tensor.

Expected: violations
"""
import torch
import torch.nn as nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

TOKENS, DIM, HIDDEN = 8, 16, 32


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.down(torch.softmax(self.up(x), dim=-1))


def example_inputs():
    return (torch.randn(TOKENS, DIM),)


def build(mesh):
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    return parallelize_module(Mixer(), mesh, plan)
