"""Data parallelism with gradient accumulation: each rank runs two micro-batches of its part of the
batch, each loss scaled by 1/2 before its backward, all-reducing the gradients after every
micro-batch (so the first micro-batch's sum is summed again), divides them by the world size and takes an SGD step.  Returns the updated weights.

violations (forward): the gradients all-reduced inside the accumulation loop
"""
import torch
import torch.distributed as dist
import torch.nn as nn

BATCH, DIM, MICRO = 8, 4, 2
LR = 0.1


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(DIM, DIM)

    def forward(self, x, y):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = BATCH // world
        x, y = x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]
        for xs, ys in zip(x.chunk(MICRO), y.chunk(MICRO)):
            loss = ((torch.tanh(self.layer(xs)) - ys) ** 2).mean() / MICRO
            loss.backward()
            for p in self.layer.parameters():
                dist.all_reduce(p.grad)
        with torch.no_grad():
            for p in self.layer.parameters():
                p -= LR * p.grad / world
        self.layer.zero_grad(set_to_none=True)
        return self.layer.weight.detach().clone(), self.layer.bias.detach().clone()


def example_module():
    return Step()


def example_inputs():
    return torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)
