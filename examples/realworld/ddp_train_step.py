"""One DistributedDataParallel training step, checked by returning the synchronised gradients.

Each rank builds the same seeded model, wraps it in DDP, takes its slice of the global
batch, and back-propagates the mean loss of its slice; DDP averages the gradients over the
ranks, which equals the gradient of the global-batch mean loss.  The function returns the
averaged gradients and the globally averaged loss, which a test compares against 1 rank.

verified
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH, IN, OUT = 12, 16, 6


def forward(inputs, targets):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    model = DDP(nn.Sequential(nn.Linear(IN, 40), nn.GELU(), nn.Linear(40, OUT)))
    x = inputs.chunk(world)[rank]
    y = targets.chunk(world)[rank]
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    global_loss = loss.detach().clone()
    dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
    return global_loss, [p.grad for p in model.parameters()]


def example_inputs():
    return torch.randn(GLOBAL_BATCH, IN), torch.randn(GLOBAL_BATCH, OUT)
