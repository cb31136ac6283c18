"""As k4_package_copy_ok.py, with the package's copy into the parallel region passing its gradient on
unreduced.

violations (backward): every rank's gradient of x is its partial sum only; named at that backward's
return in k4_row_regions/rows_bugs.py, where the all-reduce belongs.
"""
import torch
import torch.distributed as dist
from k4_row_regions.rows import ReduceFromRanks
from k4_row_regions.rows_bugs import CopyToRanksNoReduce


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    w_up_shard = torch.chunk(w_up, world, dim=0)[rank]
    w_down_shard = torch.chunk(w_down, world, dim=1)[rank]
    h = torch.tanh(CopyToRanksNoReduce.apply(x) @ w_up_shard.t())
    return ReduceFromRanks.apply(h @ w_down_shard.t())


def example_inputs():
    return torch.randn(4, 8), torch.randn(16, 8), torch.randn(8, 16)
