"""A row-parallel layer from a package of the user's own (t_row_layers/layers.py; t5 twin cases).

violations: the package's row_linear_dropped binds ``summed`` to the partial product (layers.py, the line
marked 'the bug'); the violation names that file and line, not the bias add nor this file's call.
"""
import torch
from t_row_layers.layers import row_linear_dropped


def forward(x, w, b):
    return torch.relu(row_linear_dropped(x, w, b))


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
