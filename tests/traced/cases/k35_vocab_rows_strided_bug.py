"""As k35_vocab_rows_ok.py, with each rank given every world-th row of the table (a strided slice) while
its ids are counted from the start of a contiguous range.  The ranks' masks and local ids differ from one
device's by design (a rank's own vocabulary range); the rows are where the values go wrong.

violations: named at the strided slice (the line marked 'the bug'), not at the masks.
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
    rows = table[rank::world]   # the bug: the ids index a contiguous range
    emb = F.embedding(local_ids, rows).masked_fill(foreign.unsqueeze(-1), 0.0)
    dist.all_reduce(emb)
    return emb
