"""Pipeline-parallel inference: the model's layers are split into one stage per rank; the first stage
reads the input, every stage receives the activations from the one before and sends its own to the
next, and the last stage broadcasts the output to every rank.

violations (forward): the output is broadcast from the first stage, which holds only its own stage's activations
"""
import torch
import torch.distributed as dist
import torch.nn as nn

LAYERS, BATCH, DIM = 4, 3, 5


class Pipeline(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(DIM, DIM), nn.Tanh()) for _ in range(LAYERS))

    @torch.no_grad()
    def forward(self, x):
        rank, world = dist.get_rank(), dist.get_world_size()
        per = LAYERS // world
        h = x.clone()
        if rank > 0:
            dist.recv(h, src=rank - 1)
        for layer in self.layers[rank * per:(rank + 1) * per]:
            h = layer(h)
        if rank < world - 1:
            dist.send(h.contiguous(), dst=rank + 1)
        dist.broadcast(h, src=0)
        return h


def example_module():
    return Pipeline()


def example_inputs():
    return (torch.randn(BATCH, DIM),)
