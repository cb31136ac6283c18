"""Sums over the ranks only when its own launcher variable says there are several processes.

Nothing sets NUM_PROCESSES on the simulated ranks, so no collective runs there and every rank computes
the single-device program: nothing distributed is checked, and the verdict must not be `verified`.
"""
import os

import torch
import torch.distributed as dist


def forward(x):
    y = x * 2
    if int(os.environ.get("NUM_PROCESSES", "1")) > 1:
        dist.all_reduce(y)
    return y


def example_inputs():
    return (torch.randn(4, 8),)
