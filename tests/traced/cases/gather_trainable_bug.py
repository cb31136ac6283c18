"""Each rank all-gathers its (trainable) rows with plain ``dist.all_gather_into_tensor``, then adds
its rank: every rank but rank 0 returns the gathered rows shifted.

Expected: violations (output 0), on every run.  Under gradients torch itself is not steady here:
gloo writes the gathered copy of a trainable tensor on its own thread, and that write races with
autograd ("A view was created in no_grad mode ...", in most runs of one rank and not in others).
The finding is on an output, so torch confirms it with the forward pass alone.
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 8, 4


def example_inputs():
    return (torch.randn(ROWS, HIDDEN),)


def forward(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    gathered = torch.empty(ROWS, HIDDEN)
    dist.all_gather_into_tensor(gathered, (2 * x.chunk(world)[rank]).contiguous())
    return gathered + rank
