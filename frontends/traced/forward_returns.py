"""Where a custom ``autograd.Function``'s forward hands back the tensor it was given, unchanged.

A Function meant to sum its input over the ranks (megatron-core's and fairscale's
``_ReduceFromModelParallelRegion``, whose forward calls ``_reduce``) that returns ``input_`` without
all-reducing it passes each rank's partial sum on as if it were the whole: the bug's line is that
``return``.  While a custom Function's ``forward`` runs (only then: the profile hook is set around
``Function.apply``, so a file without custom Functions records as fast as before), each frame of the
checked file or the user's own package that returns the very tensor it was called with, holding the
value it was called with (the same recorded value and version counter: ``dist.all_reduce(x); return x``
changed it), is noted with the span of that ``return`` - the innermost first (``_reduce``'s before the
forward that called it).  Installed code is never noted: its line is not the user's to change.  The
reduction belongs before that ``return``: ``insertion_line`` is the line after which it goes (the statement
before the ``return`` in its block), the line a finding names.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import linecache
import sys
from typing import Any, Callable, Iterator

from torch.autograd.function import Function


class ForwardReturns:
    """The profile hook: ``unchanged(tensor, frame)`` for each such ``return`` (``checked(filename)``:
    a frame worth looking at; ``value_of(tensor)``: the tensor's current value, compared at call and return)."""

    def __init__(self, checked: Callable[[str], bool], value_of: Callable[[Any], Any],
                 unchanged: Callable[[Any, Any], None]) -> None:
        self._checked, self._value_of, self._unchanged = checked, value_of, unchanged
        self._given: dict[int, list[tuple[Any, Any, int]]] = {}   # id(frame) -> (tensor, value, version) at call
        self._worth: dict[Any, bool] = {}   # code object -> a function of the checked code taking arguments

    def hook(self, frame, event, arg) -> None:
        if event == "call":
            code = frame.f_code
            worth = self._worth.get(code)
            if worth is None:
                worth = self._worth[code] = bool(code.co_argcount) and self._checked(code.co_filename)
            if not worth:
                return
            given = tensors_given(frame, self._value_of)
            if given:
                self._given[id(frame)] = given
        elif event == "return":
            given = self._given.pop(id(frame), None)
            if given and returned_unchanged(arg, given, self._value_of):
                self._unchanged(arg, frame)


def tensors_given(frame, value_of: Callable[[Any], Any], skip: int = 0) -> list[tuple[Any, Any, int]]:
    """The tensors a call was given (its arguments after the first ``skip``: a backward's ``ctx``), each with
    its value (``value_of``) and version counter at the call."""
    code = frame.f_code
    given = [frame.f_locals.get(name) for name in code.co_varnames[skip:code.co_argcount]]
    return [(g, value_of(g), g._version) for g in given if _is_tensor(g)]


def returned_unchanged(item: Any, given: list[tuple[Any, Any, int]], value_of: Callable[[Any], Any]) -> bool:
    """``item``, returned, is one of the tensors ``given`` (``tensors_given``) holding the value it was given:
    the same known value and version counter (``dist.all_reduce(x); return x`` changed it in place)."""
    return _is_tensor(item) and any(item is g and g._version == version and value is not None
                                    and value_of(g) == value for g, value, version in given)


def insertion_line(filename: str, line: int) -> int:
    """The line after which a call that belongs before the ``return`` at ``line`` goes: the last line of the
    statement before that ``return`` in its block (``line`` itself when the ``return`` opens its block or is
    not found)."""
    for block in _blocks(filename):
        for index, stmt in enumerate(block):
            if isinstance(stmt, ast.Return) and stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
                return (block[index - 1].end_lineno or block[index - 1].lineno) if index else stmt.lineno
    return line


@functools.lru_cache(maxsize=64)
def _blocks(filename: str) -> tuple[list, ...]:
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return ()
    return tuple(block for node in ast.walk(tree) for field in ("body", "orelse", "finalbody")
                 if isinstance(block := getattr(node, field, None), list) and block
                 and isinstance(block[0], ast.stmt))


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


@contextlib.contextmanager
def noting_forward_returns(returns: ForwardReturns) -> Iterator[None]:
    """Within: ``returns`` sees the frames of every custom Function's forward (and what it calls)."""
    outer = Function.apply.__func__

    def apply(cls, *args, **kwargs):
        before = sys.getprofile()
        if before is None:
            sys.setprofile(returns.hook)
        else:   # a profile already watching (the harness guard's) keeps seeing every call

            def both(frame, event, arg):
                before(frame, event, arg)
                returns.hook(frame, event, arg)
            sys.setprofile(both)
        try:
            return outer(cls, *args, **kwargs)
        finally:
            sys.setprofile(before)

    Function.apply = classmethod(apply)
    try:
        yield
    finally:
        Function.apply = classmethod(outer)
