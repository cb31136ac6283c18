"""Pattern 5 (buggy twin): the same exchange with blocking sends hangs under gloo.

Rank r blocks in send(tag=1) until its partner posts a receive with tag 1, but the partner
is blocked in recv(tag=2) first, waiting for a message its peer has not sent yet.  Every
rank does the same: a deadlock (the gloo run times out).

Runs on exactly two ranks.

Expected: violations (deadlock at the sends and receives)
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 4, 6


def example_inputs():
    return (torch.randn(ROWS, HIDDEN),)


def forward(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    if world == 1:
        return x * 3.0
    partner = 1 - rank  # two ranks: 0 <-> 1
    once, twice = x * 1.0, x * 2.0
    if rank == 0:
        dist.send(once, dst=partner, tag=1)
        dist.send(twice, dst=partner, tag=2)
        got_twice = torch.empty_like(x)
        got_once = torch.empty_like(x)
        dist.recv(got_twice, src=partner, tag=2)
        dist.recv(got_once, src=partner, tag=1)
    else:
        got_twice = torch.empty_like(x)
        got_once = torch.empty_like(x)
        dist.recv(got_twice, src=partner, tag=2)
        dist.recv(got_once, src=partner, tag=1)
        dist.send(once, dst=partner, tag=1)
        dist.send(twice, dst=partner, tag=2)
    return got_once + got_twice
