"""Where a custom ``autograd.Function``'s backward broke the backward pass, from torch itself.

Two ways a Function's backward (the user's, or a library's such as megatron-core's mappings) breaks
the backward pass torch runs for the check:

- its Python code raises (a name used before it is bound, a shape error): the traceback passes
  through the ``backward`` frame, whose ``ctx`` is the node torch made for the Function
  (``torch.autograd.function.BackwardCFunction``);
- it returns a gradient autograd rejects ("Function XBackward returned an invalid gradient at
  index 0 ..."): raised by the engine after the frame is gone, so the line of the ``return`` that
  handed the gradient back is taken while the backward runs (a profile hook that sees only the
  returns of those frames, not every line).  A ``return`` written over several lines
  (``return (None,\n        grad_input, ...)``) is named at the element that made the rejected
  gradient: the one tensor of the returned tuple with the shape torch says it got.

Either is the program's backward failing, not the backward this tool adds being refused.
"""
from __future__ import annotations

import ast
import linecache
import re
import sys
from typing import Any, Callable

_NODE_IN_MESSAGE = re.compile(r"^Function (\w+) returned an")
_GOT_SHAPE = re.compile(r"got \[([\d, ]*)\] but expected")


def _is_function_backward(frame) -> bool:
    import torch

    return frame.f_code.co_name == "backward" and \
        isinstance(frame.f_locals.get("ctx"), torch.autograd.function.BackwardCFunction)


def raising_backward(error: BaseException) -> tuple[str, int] | None:
    """(file, line) of the innermost custom Function backward frame the exception passed through."""
    tb, found = error.__traceback__, None
    while tb is not None:
        if _is_function_backward(tb.tb_frame):
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


class BackwardReturns:
    """While the backward runs: the file and line each custom Function's ``backward`` returned from,
    by the name of its node (``XBackward``).  ``unchanged(tensor, frame)``, when given, is called, while
    that ``return`` runs, for each returned gradient that is the very tensor the backward was handed, holding
    the value it was handed (``value_of`` and its version counter the same as at the call: not reduced in
    place, as ``dist.all_reduce(grad); return grad`` does): a backward that passes its gradient on as it came,
    no reduction, no scaling."""

    def __init__(self, unchanged: Callable[[Any, Any], None] | None = None,
                 value_of: Callable[[Any], Any] = id) -> None:
        self.returned: dict[str, tuple[str, int]] = {}
        self.shapes: dict[str, list[tuple[int, ...] | None]] = {}   # per node: each returned element's shape
        self._before: Any = None
        self._unchanged, self._value_of = unchanged, value_of
        # id(frame) -> the gradients that backward was called with, each with its value and version then
        self._handed: dict[int, list[tuple[Any, Any, int]]] = {}

    def _hook(self, frame, event, arg) -> None:
        if event not in ("call", "return") or frame.f_code.co_name != "backward" or not _is_function_backward(frame):
            return
        if event == "call":
            if self._unchanged is not None:
                from .forward_returns import tensors_given

                self._handed[id(frame)] = tensors_given(frame, self._value_of, skip=1)
            return
        node = type(frame.f_locals["ctx"]).__name__
        self.returned[node] = (frame.f_code.co_filename, frame.f_lineno)
        items = arg if isinstance(arg, tuple) else (arg,)
        self.shapes[node] = [tuple(item.shape) if hasattr(item, "shape") else None for item in items]
        handed = self._handed.pop(id(frame), [])
        if handed:
            from .forward_returns import returned_unchanged

            for item in items:
                if returned_unchanged(item, handed, self._value_of):
                    self._unchanged(item, frame)

    def __enter__(self) -> "BackwardReturns":
        self._before = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._before)

    def rejected(self, error: BaseException) -> tuple[str, int] | None:
        """(file, line) of the ``return`` whose gradient autograd rejected in ``error``."""
        match = _NODE_IN_MESSAGE.match(str(error))
        found = self.returned.get(match.group(1)) if match else None
        got = _GOT_SHAPE.search(str(error))
        if found is None or got is None:
            return found
        shape = tuple(int(n) for n in got.group(1).replace(" ", "").split(",") if n)
        hits = [i for i, s in enumerate(self.shapes.get(match.group(1), [])) if s == shape]
        if len(hits) != 1:
            return found
        return found[0], _element_line(found[0], found[1], hits[0])


def _element_line(filename: str, line: int, index: int) -> int:
    """The first line of element ``index`` of the tuple the ``return`` starting at ``line`` hands back
    (``line`` when the statement is no such ``return``)."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return line
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.lineno == line and isinstance(node.value, ast.Tuple):
            elements = node.value.elts
            if index < len(elements) and not any(isinstance(e, ast.Starred) for e in elements[:index + 1]):
                return elements[index].lineno
    return line
