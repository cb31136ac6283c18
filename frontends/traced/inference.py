"""Entries decorated with ``@torch.inference_mode()`` run under ``torch.no_grad()`` instead.

Inference tensors keep no version counters, which the recorder needs to follow in-place writes
("Inference tensors do not track version counter"); ``no_grad`` computes the same values and
records no backward either.  Said as an assumption of the run (in the JSON report, not only on
stderr).
"""
from __future__ import annotations

import functools
import types
from typing import Any

import torch

SAID = ("the entry is decorated with @torch.inference_mode(): it ran under torch.no_grad() instead (the same "
        "values; inference tensors keep no version counters, which the recording needs); no gradients are checked")


def _decorated(fn: Any) -> bool:
    function = getattr(fn, "__func__", fn)
    if getattr(function, "__wrapped__", None) is None:
        return False
    for cell in getattr(function, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        owner = getattr(value, "__self__", value)
        if isinstance(owner, torch.inference_mode) and getattr(owner, "mode", True):
            return True
    return False


def _under_no_grad(function):
    inner = function.__wrapped__

    @functools.wraps(inner)
    def run(*args, **kwargs):
        with torch.no_grad():
            return inner(*args, **kwargs)
    return run


def without_inference_mode(target: Any) -> tuple[Any, str | None]:
    """``target`` (a function, or a module whose ``forward`` is decorated) with the decorator replaced
    by ``torch.no_grad()``; the sentence to state, or None when it was not decorated."""
    if isinstance(target, torch.nn.Module):
        forward = type(target).forward
        if not _decorated(forward):
            return target, None
        target.forward = types.MethodType(_under_no_grad(forward), target)
        return target, SAID
    if not _decorated(target):
        return target, None
    return _under_no_grad(target), SAID
