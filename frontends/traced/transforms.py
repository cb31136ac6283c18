"""Functions that parallelize a module they are given, as entries.

``tensor_parallel_linear(fabric, linear: nn.Linear, style)`` (litgpt) shards ``linear`` in place and
returns nothing: calling it records nothing worth comparing.  Such an entry (a function with one
parameter hinted as a single ``nn.Module`` class) is checked the way it is used: the harness builds that
module (its input size from the given ``--input``, the rest as for any module entry), the function is
called on it with the other arguments (``--arg``, defaults, strategy objects from the simulated world),
and the module it returns, or else the one it was given, is the entry whose ``forward`` is traced.
"""
from __future__ import annotations

import inspect
import typing
from typing import Any

import torch

from . import harness


def module_parameter(fn: Any) -> inspect.Parameter | None:
    """The one positional parameter of ``fn`` hinted as a single ``nn.Module`` subclass."""
    if not inspect.isfunction(fn):
        return None
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    found = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and _is_module_class(fn, p)]
    return found[0] if len(found) == 1 else None


def is_transform(fn: Any) -> bool:
    """A function that takes one module and returns nothing or a module (its return hint says so)."""
    if module_parameter(fn) is None:
        return False
    try:
        returned = inspect.signature(fn).return_annotation
        hints = typing.get_type_hints(fn)
    except Exception:
        return False
    returned = hints.get("return", returned)
    return returned is None or returned is type(None) or (inspect.isclass(returned)
                                                          and issubclass(returned, torch.nn.Module))


def _is_module_class(fn: Any, param: inspect.Parameter) -> bool:
    hint = harness.resolved_hint(fn, param)
    return inspect.isclass(hint) and issubclass(hint, torch.nn.Module)


def own_arguments(fn: Any, args: dict) -> tuple[dict, dict]:
    """``args`` split into those naming ``fn``'s parameters and the rest (the module's ``forward``'s)."""
    names = set(inspect.signature(fn).parameters)
    return {k: v for k, v in args.items() if k in names}, {k: v for k, v in args.items() if k not in names}


def transformed(fn: Any, world: int, input_features: int | None, args: dict) -> torch.nn.Module:
    """The module ``fn`` parallelized: built, passed to ``fn`` with its other arguments, returned."""
    param = module_parameter(fn)
    cls = harness.resolved_hint(fn, param)
    built = harness.constructor_arguments(cls, {}, 0, world, input_features)
    target = cls(**built)
    harness.note(f"{param.name}={cls.__name__}({', '.join(f'{k}={v}' for k, v in built.items() if _shown(v))}) "
                 f"passed to {fn.__name__}, whose result is traced")
    values = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        if p.name == param.name:
            values.append(target)
        elif p.name in args:
            values.append(args[p.name])
        elif p.default is not inspect.Parameter.empty:
            values.append(p.default)
        else:
            values.append(dict(harness.call_arguments(fn, None, [p], world))[p.name])
    result = fn(*values)
    return result if isinstance(result, torch.nn.Module) else target


def _shown(value: Any) -> bool:
    return isinstance(value, (int, float, bool, str)) or value is None
