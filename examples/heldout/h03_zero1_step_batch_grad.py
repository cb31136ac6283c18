"""ZeRO-1 style step written by hand: gradients reduce-scattered and averaged, each rank updates its
shard of the flat parameter, then the shards are all-gathered back.

violations (backward): the step's own backward leaves each rank's rows of the trainable batch world times one device's gradient (its mean is over its own rows); the updated weight is right
"""
import torch
import torch.distributed as dist
import torch.nn as nn

BATCH, DIM = 8, 6
LR = 0.1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        return torch.tanh(self.lin(x)).pow(2).mean()


def example_module():
    return Step(Net())


class Step(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = BATCH // world
        loss = self.net(x[rank * n:(rank + 1) * n])
        loss.backward()
        w = self.net.lin.weight
        flat = w.grad.reshape(-1)
        shard = flat.numel() // world
        mine = torch.empty(shard)
        dist.reduce_scatter_tensor(mine, flat.contiguous())
        mine /= world
        with torch.no_grad():
            p = w.reshape(-1)[rank * shard:(rank + 1) * shard] - LR * mine
            full = torch.empty(flat.numel())
            dist.all_gather_into_tensor(full, p.contiguous())
            w.copy_(full.reshape(w.shape))
        self.net.zero_grad(set_to_none=True)
        return w.detach().clone()


def example_inputs():
    return (torch.randn(BATCH, DIM, requires_grad=True),)
