"""A row-parallel layer from a package of the user's own (t_row_layers/layers.py; t5 twin cases).

verified: the package's row_linear reduces before its bias.
"""
import torch
from t_row_layers.layers import row_linear


def forward(x, w, b):
    return torch.relu(row_linear(x, w, b))


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
