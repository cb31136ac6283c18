"""The user's file:line for the op torch is running right now.

Forward ops: the innermost frame of the user's file (an op inside a library gets the user's
line that called into the library).  Backward ops of a custom ``autograd.Function`` run the
user's own backward code, so the same frame walk finds its lines.  Other backward ops run
inside the autograd engine: anomaly mode keeps, on each graph node, the stack of the forward
call that created it, and that stack names the user's forward line.
"""
from __future__ import annotations

import os
import re
import sys

from verifier.ir import Span

_TRACEBACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


class SpanFinder:
    def __init__(self, user_file: str, shown_as: str) -> None:
        self._user_file = os.path.realpath(user_file)
        self.shown_as = shown_as
        self._same: dict[str, bool] = {}
        self.fallback: int | None = None   # the line of the user's .backward() (or the entry call)

    def _is_user(self, filename: str) -> bool:
        known = self._same.get(filename)
        if known is None:
            known = self._same[filename] = os.path.realpath(filename) == self._user_file
        return known

    def span(self) -> Span:
        node = _current_autograd_node()
        if node is not None and not _is_custom_function(node):
            line = self._line_from_node(node)
            if line is not None:
                return Span(line, self.shown_as)
        frame = sys._getframe(1)
        while frame is not None:
            if self._is_user(frame.f_code.co_filename):
                return Span(frame.f_lineno, self.shown_as)
            frame = frame.f_back
        return Span(self.fallback, self.shown_as)

    def _line_from_node(self, node) -> int | None:
        try:
            stack = node.metadata.get("traceback_")
        except (AttributeError, RuntimeError):
            return None
        if not stack:
            return None
        for entry in reversed(stack):
            for match in _TRACEBACK_LINE.finditer(entry):
                if self._is_user(match.group("file")):
                    return int(match.group("line"))
        return None


def _current_autograd_node():
    import torch

    return torch._C._current_autograd_node()


def _is_custom_function(node) -> bool:
    import torch

    return isinstance(node, torch.autograd.function.BackwardCFunction)
