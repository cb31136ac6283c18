"""DTensor plan whose colwise layer keeps a DTensor output, so the softmax over the hidden dim is redistributed.

Twin of dtensor_local_output_softmax_sharded_dim.py with use_local_output=False: the
softmax sees a Shard(-1) DTensor and DTensor's operator rules gather the dim before
normalising; the rowwise layer consumes that replicated DTensor (DTensor picks the redistribution).

Expected: verified
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
    plan = {"up": ColwiseParallel(use_local_output=False), "down": RowwiseParallel()}
    return parallelize_module(Mixer(), mesh, plan)
