"""A DTensor plan (as examples/models/dtensor_softmax_sharded_dim_ok.py): the up projection column-parallel and
kept a DTensor, the down projection row-parallel.  Its twin makes the down projection ColwiseParallel: each rank
returns its piece of the output's last dim; the piece was made inside that layer's forward, whose style chose
the layout where it was made (the repair line), not at the return."""
import torch
import torch.nn as nn
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

TOKENS, DIM, HIDDEN = 4, 6, 8


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
    plan = {"up": ColwiseParallel(use_local_output=False),
            "down": RowwiseParallel()}
    return parallelize_module(Mixer(), mesh, plan)
