"""Ulysses-style attention whose first all-to-all lays the gathered sequence out wrong: the received buffer is
``[world, s/world, ...]`` (source rank first) and the code swaps its first two dims before flattening them,
interleaving the ranks' tokens.  The reshapes before the all-to-all give values of shapes no block of one
device's (``[s/world, b, world, h/world, d]`` against ``[s, b, 1, h, d]``), which say nothing: the first value
that differs is the transposed buffer flattened, on the marked line."""
import torch
import torch.distributed as dist

SEQ, BATCH, HEADS, DIM = 4, 1, 4, 2


def heads_to_seq(x):
    world = dist.get_world_size()
    s_local, b, h, d = x.shape
    send = x.reshape(s_local, b, world, h // world, d).permute(2, 0, 1, 3, 4).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.transpose(0, 1).reshape(world * s_local, b, h // world, d)  # the bug: transpose(0, 1)


def seq_to_heads(x):
    world = dist.get_world_size()
    s, b, h_local, d = x.shape
    send = x.reshape(world, s // world, b, h_local, d).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.permute(1, 2, 0, 3, 4).reshape(s // world, b, world * h_local, d)


def forward(q, k, v):
    rank, world = dist.get_rank(), dist.get_world_size()
    q, k, v = (heads_to_seq(t.chunk(world, dim=0)[rank]) for t in (q, k, v))
    scores = torch.einsum("sbhd,tbhd->bhst", q, k).softmax(dim=-1)
    out = seq_to_heads(torch.einsum("bhst,tbhd->sbhd", scores, v))
    pieces = [torch.empty_like(out) for _ in range(world)]
    dist.all_gather(pieces, out.contiguous())
    return torch.cat(pieces, dim=0)


def example_inputs():
    return tuple(torch.randn(SEQ, BATCH, HEADS, DIM, requires_grad=False) for _ in range(3))
