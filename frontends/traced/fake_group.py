"""Calls into torch's fake process group (the simulated ranks' group), where it refuses what gloo accepts.

The fake group computes no values (the verifier does), but it checks some arguments, and one check is
stricter than gloo's: an ``all_to_all_single`` whose input is empty on a rank that receives rows
(a rank that routes no token to any expert in a mixture-of-experts dispatch) raises "inputBuffer is
empty" there, while gloo runs it.  That call gets a one-row stand-in input; the recording keeps the
user's arguments (the recorder records them, not these).
"""
from __future__ import annotations

_ALL_TO_ALL = "c10d.alltoall_base_.default"


def call(func, args, kwargs):
    """``func(*args, **kwargs)`` on the fake group."""
    if str(func) == _ALL_TO_ALL:
        args = _nonempty_input(func, list(args), kwargs)
    return func(*args, **kwargs)


def _nonempty_input(func, args: list, kwargs: dict) -> list:
    import torch

    names = [a.name for a in func._schema.arguments]
    if "input" not in names or "input_split_sizes" not in names or kwargs:
        return args
    at, sizes_at = names.index("input"), names.index("input_split_sizes")
    if max(at, sizes_at) >= len(args) or not isinstance(args[at], torch.Tensor):
        return args
    source, sizes = args[at], list(args[sizes_at] or [])
    wanted = list(args[names.index("output_split_sizes")] or []) if "output_split_sizes" in names else []
    if source.numel() or not any(int(n) > 0 for n in wanted) or not sizes:
        return args
    args[at] = torch.zeros((1,) + tuple(source.shape[1:]), dtype=source.dtype)
    args[sizes_at] = [1] + [0] * (len(sizes) - 1)
    return args
