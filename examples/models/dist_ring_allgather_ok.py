"""Ring all-gather written with point-to-point ops.

Each rank projects its block of rows, then in world-1 steps passes one block to the
next rank (isend) while receiving one from the previous rank (recv).  Sends are
non-blocking, so every rank reaches its recv and the ring makes progress.

Expected: verified
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN, OUT = 8, 16, 16


def example_inputs():
    return torch.randn(ROWS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, OUT, requires_grad=False)  # forward only


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    blocks = [torch.zeros(ROWS // world, OUT) for _ in range(world)]
    blocks[rank] = x.chunk(world, dim=0)[rank] @ w
    for step in range(world - 1):
        send_req = dist.isend(blocks[(rank - step) % world], dst=nxt)
        dist.recv(blocks[(rank - step - 1) % world], src=prev)
        send_req.wait()
    return torch.cat(blocks, dim=0)
