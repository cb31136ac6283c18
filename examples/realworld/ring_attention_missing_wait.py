"""Ring attention whose K/V exchange never waits for its receives.

Each rank keeps its block of queries and passes its key/value block (stacked, one
message) to the next rank with `isend`/`irecv` at every step; scores of each visiting block
are merged into a running max `m`, normaliser `l` and accumulator with the
flash-attention rescaling `exp(m_old - m_new)`.
The author dropped the `wait()` on the `isend`/`irecv` works ("the next matmul will block
anyway"): the receive buffer is read while the transfer may still be in flight, so the
next step may attend to uninitialised memory, and the unwaited works are never completed
(under gloo the 2- and 4-rank runs do not finish).

violations
"""
import torch
import torch.distributed as dist

BATCH, SEQ, HEAD_DIM = 5, 12, 7


def ring_exchange(k, v, rank, world):
    send_to, recv_from = (rank + 1) % world, (rank - 1) % world
    kv = torch.stack([k, v])  # one message per step: k and v travel together
    kv_next = torch.empty_like(kv)
    dist.isend(kv, dst=send_to)
    dist.irecv(kv_next, src=recv_from)
    return kv_next[0], kv_next[1]


def ring_attention(q, k, v, rank, world):
    scale = q.size(-1) ** -0.5
    m = torch.full(q.shape[:-1], float("-inf"))
    l = torch.zeros(q.shape[:-1])
    acc = torch.zeros_like(q)
    for step in range(world):
        scores = torch.einsum("bqd,bkd->bqk", q, k) * scale
        m_new = torch.maximum(m, scores.amax(dim=-1))
        p = torch.exp(scores - m_new.unsqueeze(-1))
        correction = torch.exp(m - m_new)
        l = l * correction + p.sum(dim=-1)
        acc = acc * correction.unsqueeze(-1) + torch.einsum("bqk,bkd->bqd", p, v)
        m = m_new
        if step < world - 1:
            k, v = ring_exchange(k, v, rank, world)
    return acc / l.unsqueeze(-1)


def forward(q, k, v):
    rank, world = dist.get_rank(), dist.get_world_size()
    q, k, v = (t.chunk(world, dim=1)[rank].contiguous() for t in (q, k, v))
    out = ring_attention(q, k, v, rank, world)
    blocks = [torch.empty_like(out) for _ in range(world)]
    dist.all_gather(blocks, out)
    return torch.cat(blocks, dim=1)


def example_inputs():
    return tuple(torch.randn(BATCH, SEQ, HEAD_DIM) for _ in range(3))
