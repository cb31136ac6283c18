"""Twin of k26_plan_output_piece_ok.py whose up projection's ColwiseParallel hands out its local output (the
default use_local_output=True, as examples/models/dtensor_local_output_softmax_sharded_dim.py): the softmax over
the last dim runs on each rank's piece of it.  The values go wrong at the softmax; the piece was handed out by
the layer whose style was chosen on the marked line (the repair line)."""
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
    plan = {"up": ColwiseParallel(),  # the bug: a plain local piece; use_local_output=False keeps a DTensor
            "down": RowwiseParallel()}
    return parallelize_module(Mixer(), mesh, plan)
