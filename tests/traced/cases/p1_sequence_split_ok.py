"""Sequence parallel: each rank takes its rows of x, runs a per-token op, and the rows are gathered
back in rank order.  Expected: verified."""
import torch
import torch.distributed as dist

SEQ, HIDDEN = 8, 4


def example_inputs():
    return torch.randn(SEQ, HIDDEN, requires_grad=False), torch.randn(HIDDEN, requires_grad=False)


def forward(x, scale):   # scale: a per-feature weight every rank holds whole
    rank, world = dist.get_rank(), dist.get_world_size()
    local = x.chunk(world, dim=0)[rank]
    h = torch.tanh(local) * scale
    out = torch.empty(world * h.shape[0], HIDDEN)
    dist.all_gather_into_tensor(out, h.contiguous())
    return out
