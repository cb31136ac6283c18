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
    wanted_names = ("input", "input_split_sizes", "output_split_sizes")
    if kwargs or any(name not in names or names.index(name) >= len(args) for name in wanted_names):
        return args
    at, sizes_at, out_at = (names.index(name) for name in wanted_names)
    if not isinstance(args[at], torch.Tensor):
        return args
    source, sizes, wanted = args[at], list(args[sizes_at] or []), list(args[out_at] or [])
    if source.numel() or not any(int(n) > 0 for n in wanted) or not sizes:
        return args
    args[at] = torch.zeros((1,) + tuple(source.shape[1:]), dtype=source.dtype)
    args[sizes_at] = [1] + [0] * (len(sizes) - 1)
    return args
