"""Rows scattered to the ranks and gathered back through a package of the user's own (k4_row_regions/).

verified: each region's backward is the other's forward.
"""
import torch
from k4_row_regions.rows import GatherRows, ScatterRows


def forward(x):
    return GatherRows.apply(torch.tanh(ScatterRows.apply(x)))


def example_inputs():
    return (torch.randn(8, 4),)
