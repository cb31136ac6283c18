"""A harness: Python that builds the entry and its inputs (``--harness FILE.py``, or one an LLM wrote).

The file defines ``harness(module, world)`` (or ``harness(world)``) returning ``(entry, inputs)``:

- ``module`` is the user's file as the tracer imported it for this run (``module.MyLayer``), ``world`` the
  number of ranks of this run (1 for the single-device reference); torch.distributed is initialised for
  the run and the package's parallel state is set up, as for any entry;
- ``entry``: an ``nn.Module`` built from a class of the user's file, or a function of the file;
- ``inputs``: the positional arguments of its ``forward`` (or of the function), a tuple or list (tensors,
  numbers, None, config objects), or a dict from parameter name to value.

The harness runs only in the tracing child (``frontends.sandbox``), once per run, and only builds
arguments: ``harness_guard`` refuses an entry that is not the file's own object and any harness code
that runs while the entry is recorded.
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import os
import sys
import traceback
from typing import Any

from .harness_guard import HarnessGuard

_SERIAL = itertools.count()
MAX_MESSAGE = 600


class HarnessError(Exception):
    """The harness raised or returned something else than ``(entry, inputs)``; ``line``: the harness's line."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def _load(path: str):
    name = f"_verify_agent_harness_{next(_SERIAL)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise HarnessError(f"cannot import the harness {os.path.basename(path)}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise _raised(error, path, "importing the harness") from error
    function = getattr(module, "harness", None)
    if not callable(function):
        raise HarnessError("the harness file defines no function harness(module, world)")
    return function


def _raised(error: BaseException, path: str, doing: str) -> HarnessError:
    target = os.path.realpath(path)
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.realpath(frame.filename) == target:
            line = frame.lineno
    last = traceback.extract_tb(error.__traceback__)[-1:] or [None]
    where = f" (harness line {line})" if line else ""
    inside = ""
    if last[0] is not None and os.path.realpath(last[0].filename) != target:
        inside = f", in {os.path.basename(last[0].filename)} line {last[0].lineno}"
    text = " ".join(f"{type(error).__name__}: {error}".split())[:MAX_MESSAGE]
    return HarnessError(f"{doing} raised {text}{where}{inside}", line)


def _call(function, user_module, world: int, path: str):
    try:
        parameters = [p for p in inspect.signature(function).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        parameters = []
    arguments = (user_module, world) if len(parameters) >= 2 else (world,)
    try:
        return function(*arguments)
    except Exception as error:
        raise _raised(error, path, "the harness") from error


def _split(value: Any) -> tuple[Any, Any]:
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise HarnessError(f"the harness returned {_describe(value)}; expected a pair (entry, inputs)")
    entry, inputs = value
    if not isinstance(inputs, (tuple, list, dict)):
        raise HarnessError(f"the harness returned {_describe(inputs)} as the inputs; expected a tuple or list of "
                           f"the entry's positional arguments, or a dict from parameter name to value")
    return entry, inputs


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def _named(call_fn, inputs) -> tuple[list[str], list[Any]]:
    try:
        parameters = [p for p in inspect.signature(call_fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        parameters = []
    if not isinstance(inputs, dict):
        values = list(inputs)
        if len(values) > len(parameters) and not any(p.kind == p.VAR_POSITIONAL for p in
                                                     _all_parameters(call_fn)):
            raise HarnessError(f"the harness gave {len(values)} inputs, but the entry takes "
                               f"{len(parameters)} positional parameter(s) "
                               f"({', '.join(p.name for p in parameters) or 'none'})")
        names = [p.name for p in parameters[:len(values)]]
        names += [f"input{i}" for i in range(len(names), len(values))]
        return names, values
    unknown = [key for key in inputs if key not in {p.name for p in parameters}]
    if unknown:
        raise HarnessError(f"the harness's inputs name {', '.join(map(str, unknown))}, which the entry does not take "
                           f"by position (parameters: {', '.join(p.name for p in parameters) or 'none'})")
    last = max((i for i, p in enumerate(parameters) if p.name in inputs), default=-1)
    names, values = [], []
    for parameter in parameters[:last + 1]:
        if parameter.name in inputs:
            value = inputs[parameter.name]
        elif parameter.default is not inspect.Parameter.empty:
            value = parameter.default
        else:
            raise HarnessError(f"the harness's inputs give no value for {parameter.name}, which has no default")
        names.append(parameter.name)
        values.append(value)
    return names, values


def _all_parameters(fn) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []


def build(user_module, harness_path: str, world: int, entry: str | None):
    """``(name, target, names, inputs, guard)``: the entry's name in the user's module, the object to call
    (a module or function), its inputs by parameter name, and the guard to hold over the recorded run.
    Raises ``HarnessError`` (the harness failed: what it raised, its line) or ``HarnessRefused``."""
    guard = HarnessGuard(user_module, harness_path)
    with guard.building():
        function = _load(harness_path)
        target, inputs = _split(_call(function, user_module, world, harness_path))
    guard.check_unchanged()
    name = guard.check_entry(target, entry)
    import torch

    call_fn = target.forward if isinstance(target, torch.nn.Module) else target
    names, values = _named(call_fn, inputs)
    return name, target, names, values, guard
