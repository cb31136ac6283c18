"""Neighbouring ranks swap their row blocks of a projection with blocking point-to-point
calls -- but both partners call recv first, so each waits for a send that never comes.

Pairs are (0, 1), (2, 3), ...; the exchange itself would be fine with one side sending first.

Expected: violations
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 8, 16


def example_inputs():
    return torch.randn(ROWS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    partner = rank + 1 - 2 * (rank % 2)
    mine = x.chunk(world, dim=0)[rank] @ w
    if world == 1:
        return mine + mine
    theirs = torch.empty_like(mine)
    dist.recv(theirs, src=partner)
    dist.send(mine, dst=partner)
    return mine + theirs
