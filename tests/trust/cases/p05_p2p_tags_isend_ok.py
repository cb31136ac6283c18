"""Pattern 5: two tagged messages to the partner, received in the other tag order.

The sends are asynchronous (isend), so both are in flight while the partner posts its
receives; each receive takes the message with its tag, whatever the order.  Verified under
gloo: every rank ends with 3 * x, as the single rank does.

Runs on exactly two ranks.

Expected: deadlock-free; values routed by tag
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
    first = dist.isend(once, dst=partner, tag=1)
    second = dist.isend(twice, dst=partner, tag=2)
    got_twice = torch.empty_like(x)
    got_once = torch.empty_like(x)
    dist.recv(got_twice, src=partner, tag=2)
    dist.recv(got_once, src=partner, tag=1)
    first.wait()
    second.wait()
    return got_once + got_twice
