"""Pipeline stages over send/recv (as examples/realworld/pipeline_p2p_microbatches.py): a Python list of
LAYERS tanh layers is split over the ranks, each rank taking its slice of the list (a Python pick no op
records), receiving the previous stage's activations and sending its own on; the last stage broadcasts.
Its twin's slice ends one layer late: rank 0 also applies the first layer of rank 1, which applies it again."""
import torch
import torch.distributed as dist

BATCH, HIDDEN, LAYERS = 3, 8, 4


def example_inputs():
    return (torch.randn(BATCH, HIDDEN, requires_grad=False),)


def forward(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    weights = [torch.randn(HIDDEN, HIDDEN) / HIDDEN ** 0.5 for _ in range(LAYERS)]
    per_stage = LAYERS // world
    mine = weights[rank * per_stage:(rank + 1) * per_stage + 1]  # the bug: one layer past the stage
    h = x.clone()
    if rank > 0:
        dist.recv(h, src=rank - 1)
    for w in mine:
        h = torch.tanh(h @ w)
    if rank < world - 1:
        dist.send(h, dst=rank + 1)
    out = h if rank == world - 1 else torch.empty(BATCH, HIDDEN)
    dist.broadcast(out, src=world - 1)
    return out
