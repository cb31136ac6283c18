"""x1 twin cases: a sequence the loader split unevenly (rank r holds the rows ``owner`` gives it) is
re-sharded into even blocks with ``all_to_all_single``: the ranks exchange their row counts first (an
all-to-all of the counts, read with ``tolist()``), then the rows; each block is scaled by its rows' global
positions and the blocks are gathered back.

verified
"""
import torch
import torch.distributed as dist

SEQ, DIM = 8, 3


def owner(i, world):
    return (i * i * world) // (SEQ * SEQ)


def forward(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = [i for i in range(SEQ) if owner(i, world) == rank]
    block = SEQ // world
    send = torch.tensor([sum(1 for i in mine if i // block == t) for t in range(world)])
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    local = x[mine[0]:mine[-1] + 1] if mine else x[:0]
    even = torch.empty(block, DIM)
    dist.all_to_all_single(even, local.contiguous(), recv.tolist(), send.tolist())
    positions = torch.arange(rank * block, (rank + 1) * block)
    y = even * (1 + positions.unsqueeze(1))
    parts = [torch.empty_like(y) for _ in range(world)]
    dist.all_gather(parts, y)
    return torch.cat(parts)


def example_inputs():
    return (torch.randn(SEQ, DIM),)
