"""A vocabulary-parallel embedding lookup: each rank holds a contiguous range of the table's rows, looks up
the ids in its range, zeroes the rows of ids other ranks own, and an all-reduce adds the ranks' results
(the twin of k35_vocab_rows_strided_bug.py).  ``ids`` holds token ids in [0, VOCAB).

verified
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

SEQ, VOCAB, HIDDEN = 8, 16, 8


def example_inputs():
    return torch.randint(0, VOCAB, (SEQ,)), torch.randn(VOCAB, HIDDEN, requires_grad=False)


def forward(ids, table):
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = VOCAB // world
    start = rank * per_rank
    foreign = (ids < start) | (ids >= start + per_rank)
    local_ids = (ids - start).masked_fill(foreign, 0)
    rows = table.chunk(world, dim=0)[rank]
    emb = F.embedding(local_ids, rows).masked_fill(foreign.unsqueeze(-1), 0.0)
    dist.all_reduce(emb)
    return emb
