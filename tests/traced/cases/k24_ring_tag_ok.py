"""Ring all-gather with point-to-point ops (as examples/models/dist_ring_allgather_ok.py): each rank projects its
block of rows, then passes blocks on (isend) while receiving the previous rank's (recv).  Its twin receives with
tag=1 while the sends keep the default tag 0: no message meets, the ranks hang."""
import torch
import torch.distributed as dist

ROWS, HIDDEN, OUT = 4, 6, 5


def example_inputs():
    return torch.randn(ROWS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, OUT, requires_grad=False)


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
