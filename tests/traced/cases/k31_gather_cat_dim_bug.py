"""A column-parallel product gathered for a replicated output, the gathered column blocks concatenated along
the rows: every piece the all-gather delivers is a right block of one device's product, and the
concatenation puts them in the wrong place (rows where columns belong).  The first wrong value is the
concatenation's, on the marked line, not the all-gather's."""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 4, 4, 8


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x @ w.chunk(world, dim=1)[rank]
    if world == 1:
        return torch.relu(y)
    pieces = [torch.empty_like(y) for _ in range(world)]
    dist.all_gather(pieces, y.contiguous())
    gathered = torch.cat(pieces, dim=0)  # the bug: dim=0, not dim=1
    return torch.relu(gathered).view(TOKENS, OUT)


def example_inputs():
    return torch.randn(TOKENS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, OUT, requires_grad=False)
