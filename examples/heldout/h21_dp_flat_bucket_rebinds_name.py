"""Data-parallel step with one gradient bucket, written the way apex and early Megatron did: the
gradients are flattened into one buffer, all-reduced and divided by the number of ranks, unflattened
and (meant to be) copied back into each parameter's gradient before the SGD update.  Each rank takes its own rows
of the batch; the loss is a mean over rows.

violations (forward): the loop rebinds its name to the synced piece instead of copying it back, so each rank updates with its own unsynced gradient
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

BATCH, DIM, HIDDEN = 8, 5, 6
LR = 0.2


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))

    def forward(self, x, y):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = BATCH // world
        x, y = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
        loss = (self.net(x).squeeze(-1) - y).pow(2).mean()
        loss.backward()
        grads = [p.grad for p in self.net.parameters()]
        bucket = _flatten_dense_tensors(grads)
        dist.all_reduce(bucket)
        bucket /= world
        for grad, synced in zip(grads, _unflatten_dense_tensors(bucket, grads)):
            grad = synced
        with torch.no_grad():
            for p in self.net.parameters():
                p -= LR * p.grad
        self.net.zero_grad(set_to_none=True)
        return tuple(p.detach().clone() for p in self.net.parameters())


def example_module():
    return Step()


def example_inputs():
    return torch.randn(BATCH, DIM), torch.randn(BATCH)
