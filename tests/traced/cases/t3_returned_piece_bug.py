"""A column-parallel product gathered and handed back (t3 twin cases).

violations: ``out`` is bound to the rank's piece (the line marked 'the bug') and returned: the rank
returns another shape than one device; the violation names the line that bound it, not the ``return``.
"""
import torch
import torch.distributed as dist


def gather(piece):
    pieces = [torch.empty_like(piece) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, piece)
    return torch.cat(pieces, dim=1)


def forward(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    piece = x @ w.chunk(world, 0)[rank].t()
    out = piece  # the bug: the gather was dropped here
    return out


def example_inputs():
    return torch.randn(4, 8), torch.randn(6, 8)
