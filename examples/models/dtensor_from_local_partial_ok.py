"""Row-parallel matmul on local shards wrapped into a DTensor with the Partial placement.

Every rank multiplies its slice of the input features by its rows of the weight: a
partial sum.  DTensor.from_local(..., [Partial()]) records that, and full_tensor()
reduces it.

Expected: verified
"""
import torch
from torch.distributed.tensor import DTensor, Partial

TOKENS, HIDDEN, OUT = 8, 32, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def build(mesh):
    def run(x, w):
        rank, world = mesh.get_local_rank(), mesh.size()
        y_local = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
        y = DTensor.from_local(y_local, mesh, [Partial()])
        return y.full_tensor()

    return run
