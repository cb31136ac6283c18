"""As k32_exchange_branch_ok.py, with the exchange, run only when there are several ranks, filling a second
buffer: the buffer read after the branch is memory nothing wrote.

violations: the values first go wrong reading that buffer; the write it misses belongs in the branch that ran
between its allocation and the read, named at the branch's last statement (the line marked 'the bug'), not at
the allocation (a write there would run on one device too).
"""
import torch
import torch.distributed as dist

SEQ, HEADS, DIM = 4, 4, 2


def seq_to_heads(x):
    world = dist.get_world_size()
    s_local, h, d = x.shape
    send = x.reshape(s_local, world, h // world, d).transpose(0, 1).contiguous()
    output = torch.empty_like(send)
    received = torch.empty_like(send)
    if world > 1:
        dist.all_to_all_single(received, send)   # the bug: fills received, output is read below
    else:
        output = send
    return output.reshape(world * s_local, h // world, d)


def forward(x):
    world, rank = dist.get_world_size(), dist.get_rank()
    heads = seq_to_heads(x.chunk(world, dim=0)[rank])
    pieces = [torch.empty_like(heads) for _ in range(world)]
    dist.all_gather(pieces, heads.contiguous())
    return torch.cat(pieces, dim=1)


def example_inputs():
    return (torch.randn(SEQ, HEADS, DIM, requires_grad=False),)   # forward-only code
