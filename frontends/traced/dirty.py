"""Custom autograd Functions that hand back their input marked dirty.

``ctx.mark_dirty(x); return x`` (fairscale's ``_reduce``, and a collective skipped on one device)
makes autograd bump ``x``'s version counter once after ``forward`` returns, with no aten op the
recorder could see: without this the tensor would look changed "through a path the recorder
cannot follow".  During a recording, the tensors a Function marks dirty keep the name of their
last recorded value across exactly that one bump.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from torch.autograd.function import Function, FunctionCtx

_REAL_APPLY = Function.apply.__func__
_REAL_MARK_DIRTY = FunctionCtx.mark_dirty


@contextlib.contextmanager
def following_dirty_inputs(recorder: Any) -> Iterator[None]:
    marked: list[list] = []

    def mark_dirty(ctx, *tensors):
        if marked:
            marked[-1].extend(tensors)
        return _REAL_MARK_DIRTY(ctx, *tensors)

    def apply(cls, *args, **kwargs):
        marked.append([])
        try:
            out = _REAL_APPLY(cls, *args, **kwargs)
        finally:
            dirty = marked.pop()
        for tensor in dirty:
            _follow_bump(recorder.names, tensor)
        return out

    Function.apply = classmethod(apply)
    FunctionCtx.mark_dirty = mark_dirty
    try:
        yield
    finally:
        Function.apply = classmethod(_REAL_APPLY)
        FunctionCtx.mark_dirty = _REAL_MARK_DIRTY


def _follow_bump(names: Any, tensor: Any) -> None:
    binding = names.lookup(tensor)
    if binding is None or names.current(tensor) is not None:
        return
    bumps = int(tensor._version) - binding.version - (1 if binding.pending else 0)
    if bumps == 1:   # autograd's own bump for mark_dirty, nothing else wrote it
        names.bind(tensor, binding.name)
