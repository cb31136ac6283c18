"""As k4_package_backward_ok.py, with the package's scatter not gathering its gradient back.

violations: on the ranks autograd rejects the gradient the scatter's backward returns (it has the
rows of one rank only); named at that return in k4_row_regions/rows_bugs.py.
"""
import torch
from k4_row_regions.rows_bugs import GatherRows, ScatterRowsNoGather


def forward(x):
    return GatherRows.apply(torch.tanh(ScatterRowsNoGather.apply(x)))


def example_inputs():
    return (torch.randn(8, 4),)
