"""Async all-reduce whose buffer is read before the handle is waited on.

Twin of dist_async_overlap_ok.py with `work.wait()` moved after the read.

Bug: happens-before race: `y + side` reads y while the all-reduce may still be
running, so it sees this rank's partial sum (or a torn mix).  Whether a real run shows
it depends on timing.

Expected: violations
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN = 8, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN), torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w, other, v):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    work = dist.all_reduce(y, async_op=True)
    side = torch.tanh(other @ v)
    out = y + side
    work.wait()
    return out
