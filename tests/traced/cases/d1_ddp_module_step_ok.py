"""A DistributedDataParallel model built in an entry module's constructor: each rank runs its
slice of the batch, the outputs are gathered with torch.distributed.nn.functional.all_gather (whose
backward hands each rank the gradient of its slice), and the gradients of the backward the tool adds
are averaged by DDP.  (The recorder once read DDP's gradient bucket, made in the constructor outside
the recording, as a constant: every gradient came out half of one device's.)

Expected: verified; gloo: outputs and gradients match.
"""
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, IN, HIDDEN, OUT = 4, 3, 4, 2


class DataParallelStep(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1234)
        self.model = DDP(nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, OUT)))

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        local = self.model(x.chunk(world)[rank])
        return torch.cat(dist_nn.all_gather(local), dim=0)


def example_inputs():
    return (torch.randn(BATCH, IN, requires_grad=False),)
