"""Two-microbatch pipeline over point-to-point send/recv with tagged microbatches.

A stack of LAYERS tanh layers is split evenly over the ranks, one pipeline stage per rank.
A stage receives the activations of microbatches 0 and 1 from the previous stage, applies
its layers, and sends them on with `tag=microbatch`; the last stage broadcasts the result.
Receives are posted in the order the sends are issued.

verified
"""
import torch
import torch.distributed as dist

MICRO, BATCH, HIDDEN, LAYERS = 2, 3, 16, 4


def layer_weights():
    torch.manual_seed(100)
    return [torch.randn(HIDDEN, HIDDEN) / HIDDEN ** 0.5 for _ in range(LAYERS)]


def forward(microbatches):
    rank, world = dist.get_rank(), dist.get_world_size()
    weights = layer_weights()
    per_stage = LAYERS // world
    my_layers = weights[rank * per_stage:(rank + 1) * per_stage]
    acts = [microbatches[0].clone(), microbatches[1].clone()]
    if rank > 0:
        for mb in (0, 1):
            dist.recv(acts[mb], src=rank - 1, tag=mb)
    for w in my_layers:
        acts = [torch.tanh(a @ w) for a in acts]
    if rank < world - 1:
        for mb in (0, 1):
            dist.send(acts[mb], dst=rank + 1, tag=mb)
    out = torch.stack(acts) if rank == world - 1 else torch.empty(MICRO, BATCH, HIDDEN)
    dist.broadcast(out, src=world - 1)
    return out


def example_inputs():
    # a forward pipeline (raw send/recv carry no gradient): the microbatches are not trained
    return (torch.randn(MICRO, BATCH, HIDDEN, requires_grad=False),)
