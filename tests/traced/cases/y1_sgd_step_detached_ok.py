"""y1 twin cases: a data-parallel SGD step written by hand.  Each rank takes its rows of the batch (a
batch, not trainable), runs its own backward, averages the gradient over the ranks, updates the weight
in place under no_grad and returns a detached copy of it (the weight's version counter has moved: the
detach shares it).

verified
"""
import torch
import torch.distributed as dist
import torch.nn as nn

BATCH, DIM, LR = 8, 4, 0.1


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = BATCH // world
        loss = torch.tanh(self.lin(x[rank * n:(rank + 1) * n])).pow(2).mean()
        loss.backward()
        w = self.lin.weight
        dist.all_reduce(w.grad)
        w.grad /= world
        with torch.no_grad():
            w.sub_(LR * w.grad)
        return w.detach().clone()


def example_module():
    return Step()


def example_inputs():
    return (torch.randn(BATCH, DIM).requires_grad_(False),)
