"""As k30_ulysses_transpose_ok.py, with the heads of the rank's sequence slice grouped the wrong way before the
first all-to-all: ``[h // world, world]`` where the exchange needs ``[world, h // world]``, so rank j is sent
heads j, j + world, ... instead of the j-th block of heads.  On one device the layout gives its input back
(the grouping only moves a dim of size 1 there); on the ranks the received buffer holds other elements than
the rank's block of one device's value, which no move after the exchange can fix: the send buffer's layout
(the marked line) is named, not the first value after the exchange that can be compared."""
import torch
import torch.distributed as dist

SEQ, BATCH, HEADS, DIM = 4, 1, 4, 2


def heads_to_seq(x):
    world = dist.get_world_size()
    s_local, b, h, d = x.shape
    send = x.reshape(s_local, b, h // world, world, d).permute(3, 0, 1, 2, 4).contiguous()  # the bug
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.reshape(world * s_local, b, h // world, d)


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
