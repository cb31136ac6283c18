"""Row-parallel partial sums wrapped into a DTensor declared Replicate.

Twin of dtensor_from_local_partial_ok.py with the wrong placement.

Bug: the local values are partial sums but are declared Replicate, so no reduction is
ever performed (a missing collective hidden behind a placement annotation);
full_tensor() returns rank-local partials.

Expected: violations
"""
import torch
from torch.distributed.tensor import DTensor, Replicate

TOKENS, HIDDEN, OUT = 8, 32, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def build(mesh):
    def run(x, w):
        rank, world = mesh.get_local_rank(), mesh.size()
        y_local = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
        y = DTensor.from_local(y_local, mesh, [Replicate()])
        return y.full_tensor()

    return run
