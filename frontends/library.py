"""The idiom tables: which library call, tensor method or layer maps to which handler.

Handlers are plain functions ``handler(cx, *args, **kwargs)``; Python binds the user's
arguments to the handler's parameters, so an argument we do not model is reported instead
of ignored.  The modules ``torch_ops``, ``explicit``, ``megatron``, ``dtensor`` and
``nn_modules`` fill the tables when they are imported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import libcst as cst

FUNCTIONS: dict[str, Callable] = {}  # canonical library name -> handler(cx, *args, **kwargs)
METHODS: dict[str, Callable] = {}  # tensor method name -> handler(cx, tensor, *args, **kwargs)
OBJECT_METHODS: dict[tuple[type, str], Callable] = {}  # (value class, method) -> handler(cx, obj, ...)
LAYERS: dict[str, Callable] = {}  # library nn.Module kind -> forward handler(cx, module, *args, **kwargs)
CONSTANTS: dict[str, Any] = {}  # canonical name -> value (dtypes, ReduceOp members, ...)


@dataclass
class Call:
    """Where a handler is called from: the interpreter, the source line, the call node."""

    it: Any
    line: int | None
    node: cst.CSTNode | None
    hint: str | None = None
    name: str = ""  # the canonical library name or method name that was called


def function(*names: str) -> Callable:
    def register(handler: Callable) -> Callable:
        for name in names:
            FUNCTIONS[name] = handler
        return handler
    return register


def method(*names: str) -> Callable:
    def register(handler: Callable) -> Callable:
        for name in names:
            METHODS[name] = handler
        return handler
    return register


def object_method(kind: type, *names: str) -> Callable:
    def register(handler: Callable) -> Callable:
        for name in names:
            OBJECT_METHODS[(kind, name)] = handler
        return handler
    return register


def layer(*kinds: str) -> Callable:
    def register(handler: Callable) -> Callable:
        for kind in kinds:
            LAYERS[kind] = handler
        return handler
    return register
