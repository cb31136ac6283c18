"""Sequence parallel with the split dropped: each rank runs the per-token op on all rows and the gather
brings back world times the rows.  Expected: violations, named where the split was (the line binds
local to x and runs no op), not at the gather that makes the output too long."""
import torch
import torch.distributed as dist

SEQ, HIDDEN = 8, 4


def example_inputs():
    return torch.randn(SEQ, HIDDEN, requires_grad=False), torch.randn(HIDDEN, requires_grad=False)


def forward(x, scale):   # scale: a per-feature weight every rank holds whole
    rank, world = dist.get_rank(), dist.get_world_size()
    local = x  # the bug
    h = torch.tanh(local) * scale
    out = torch.empty(world * h.shape[0], HIDDEN)
    dist.all_gather_into_tensor(out, h.contiguous())
    return out
