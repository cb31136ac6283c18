"""y2: the y1 step with its batch trainable (an activation from earlier layers).  The step returns its
updated weight made under no_grad, nothing to differentiate, but its own
backward leaves a gradient on the batch: each rank's mean is over its own rows, so its rows' gradient
is world times the single device's (the ground truth compares the gradients a step leaves).

violations
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
        loss = torch.tanh(self.lin(x[rank * n:(rank + 1) * n])).pow(2).mean()  # the bug
        loss.backward()
        w = self.lin.weight
        dist.all_reduce(w.grad)
        w.grad /= world
        with torch.no_grad():
            w.sub_(LR * w.grad)
            return w * 1.0


def example_module():
    return Step()


def example_inputs():
    return (torch.randn(BATCH, DIM, requires_grad=True),)
