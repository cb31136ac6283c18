"""Context-parallel causal attention whose mask uses local query positions.

The sequence is split contiguously over the ranks.  Keys and values are all-gathered, and
the causal mask should compare the global position of each local query with the global
key positions; the author builds the query positions with `arange(SEQ // world)`, the
positions *inside* the shard, so on every rank but the first the queries cannot see most
of the past.  Exact on one rank.

violations
"""
import torch
import torch.distributed as dist

BATCH, SEQ, HEAD_DIM = 5, 12, 7


def all_gather_seq(t, world):
    pieces = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(pieces, t.contiguous())
    return torch.cat(pieces, dim=1)


def forward(q, k, v):
    rank, world = dist.get_rank(), dist.get_world_size()
    chunk = SEQ // world
    q_local = q[:, rank * chunk:(rank + 1) * chunk]
    k_full = all_gather_seq(k[:, rank * chunk:(rank + 1) * chunk], world)
    v_full = all_gather_seq(v[:, rank * chunk:(rank + 1) * chunk], world)

    q_pos = torch.arange(chunk)
    k_pos = torch.arange(SEQ)
    causal = k_pos.unsqueeze(0) > q_pos.unsqueeze(1)
    scores = (q_local @ k_full.transpose(1, 2)) / HEAD_DIM ** 0.5
    scores = scores.masked_fill(causal, float("-inf"))
    out_local = scores.softmax(dim=-1) @ v_full
    return all_gather_seq(out_local, world)


def example_inputs():
    return tuple(torch.randn(BATCH, SEQ, HEAD_DIM) for _ in range(3))
