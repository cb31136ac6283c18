"""Pattern 4 (buggy twin): the list of pieces is passed on every rank.

torch raises ValueError on the non-source ranks ("Argument ``scatter_list`` must NOT be
specified on non-source ranks"); with one rank there is only the source, so the 1-rank
run works and the N-rank run fails.

Expected: input error at the scatter line
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 8, 6


def example_inputs():
    return (torch.randn(ROWS, HIDDEN),)


def forward(x):
    world = dist.get_world_size()
    mine = torch.empty(ROWS // world, HIDDEN)
    pieces = list(x.chunk(world, dim=0))
    dist.scatter(mine, pieces, src=0)
    out = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(out, mine)
    return torch.cat(out, dim=0)
