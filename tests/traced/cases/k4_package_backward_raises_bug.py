"""As k4_package_backward_ok.py, with the package's scatter backward raising on the ranks.

violations: the scatter's backward uses a list before making it (only where the world has more than
one rank); named at that line in k4_row_regions/rows_bugs.py, not taken for a backward this tool added.
"""
import torch
from k4_row_regions.rows_bugs import GatherRows, ScatterRowsUnbound


def forward(x):
    return GatherRows.apply(torch.tanh(ScatterRowsUnbound.apply(x)))


def example_inputs():
    return (torch.randn(8, 4),)
