"""The user's file:line for the op torch is running right now.

Forward ops: the innermost frame of the user's file (an op inside a library gets the user's
line that called into the library).  Backward ops of a custom ``autograd.Function`` run the
user's own backward code, so the same frame walk finds its lines; a library's Function runs none,
and gets the line that called its forward, as other backward ops do.  Other backward ops run
inside the autograd engine: anomaly mode keeps, on each graph node, the stack of the forward
call that created it, and that stack names the user's forward line.

An op that runs inside the user's own package (a file under a ``--path`` directory or below the
checked file's folder, not an installed library nor this tool) also carries the innermost such
line (``Span.within``): a bug inside that package is reported where it is, not at the line of the
checked file that called into it.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Iterator

from verifier.ir import Span

_TRACEBACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


_TOOL = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOOL_PACKAGES = tuple(os.path.join(_TOOL, name) + os.sep
                       for name in ("frontends", "verifier", "verify_agent", "agent", "tir_lifter"))


class SpanFinder:
    def __init__(self, user_file: str, shown_as: str, paths: tuple[str, ...] = ()) -> None:
        self._user_file = os.path.realpath(user_file)
        self.shown_as = shown_as
        self._same: dict[str, bool] = {}
        self._own: dict[str, str | None] = {}
        # the user's own code: the --path directories and the checked file's folder (not resolved:
        # a package tree of links to installed files is still the tree the user named)
        self._roots = tuple(os.path.join(os.path.abspath(p), "") for p in
                            (*paths, os.path.dirname(os.path.abspath(user_file))))
        self.fallback: int | None = None   # the line of the user's .backward() (or the entry call)
        self.frame = None   # the frame the last span() named a line of (None: a backward node's line)
        self._pinned: Span | None = None   # while set (``pinned``), every op is of this span

    @contextlib.contextmanager
    def pinned(self, span: Span) -> Iterator[None]:
        """Ops run meanwhile are of ``span``: work a call left to finish later (gloo's division of an
        asynchronous average, made at ``wait()``) is the call's, at its line."""
        before, self._pinned = self._pinned, span
        try:
            yield
        finally:
            self._pinned = before

    def _is_user(self, filename: str) -> bool:
        known = self._same.get(filename)
        if known is None:
            known = self._same[filename] = os.path.realpath(filename) == self._user_file
        return known

    def _own_file(self, filename: str) -> str | None:
        """``filename`` as an absolute path when it is the user's own code outside the checked file."""
        if filename in self._own:
            return self._own[filename]
        path = os.path.abspath(filename) if filename and not filename.startswith("<") else ""
        own = path if path and not self._is_user(filename) and path.startswith(self._roots) \
            and not path.startswith(_TOOL_PACKAGES) and not _installed(path) else None
        self._own[filename] = own
        return own

    def checked(self, filename: str) -> bool:
        """Code of the checked file or of the user's own package (what a finding may name)."""
        return self._is_user(filename) or self._own_file(filename) is not None

    def span(self) -> Span:
        self.frame = None
        if self._pinned is not None:
            return self._pinned
        node = _current_autograd_node()
        within = None
        if node is not None and not _is_custom_function(node):
            line, within = self._line_from_node(node)
            if line is not None:
                return Span(line, self.shown_as, within)
        frame = sys._getframe(1)
        inner = within is None   # a backward node's forward line in the user's package wins
        within_frame = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if self._is_user(filename):
                self.frame = within_frame if within is not None else frame
                return Span(frame.f_lineno, self.shown_as, within)
            if inner and within is None:
                own = self._own_file(filename)
                if own is not None:
                    within, within_frame = (own, frame.f_lineno), frame
            frame = frame.f_back
        if node is not None and _is_custom_function(node):
            # a library's custom Function (fairscale's copy to the parallel region): its backward runs
            # no line of the user's, the line that called its forward made it
            line, made_within = self._line_from_node(node)
            if line is not None:
                return Span(line, self.shown_as, within or made_within)
        return Span(self.fallback, self.shown_as, within)

    def of_frame(self, frame) -> Span | None:
        """The line ``frame`` is at, when it runs code of the checked file or of the user's own package
        (a custom Function's backward or forward at its ``return``); None in installed code.  A line of the
        package is called from the line whose forward call made the current backward node (in the forward:
        the checked file's line that called into the package)."""
        filename = frame.f_code.co_filename
        if self._is_user(filename):
            return Span(frame.f_lineno, self.shown_as)
        own = self._own_file(filename)
        if own is None:
            return None
        node = _current_autograd_node()
        line = self._line_from_node(node)[0] if node is not None else self._calling_line(frame)
        return Span(self.fallback if line is None else line, self.shown_as, (own, frame.f_lineno))

    def _calling_line(self, frame) -> int | None:
        """The checked file's line that called, in the forward, into the package code ``frame`` runs."""
        frame = frame.f_back
        while frame is not None and not self._is_user(frame.f_code.co_filename):
            frame = frame.f_back
        return frame.f_lineno if frame is not None else None

    def _line_from_node(self, node) -> tuple[int | None, tuple[str, int] | None]:
        try:
            stack = node.metadata.get("traceback_")
        except (AttributeError, RuntimeError):
            return None, None
        if not stack:
            return None, None
        within = None
        for entry in reversed(stack):
            for match in reversed(list(_TRACEBACK_LINE.finditer(entry))):
                if self._is_user(match.group("file")):
                    return int(match.group("line")), within
                if within is None:
                    own = self._own_file(match.group("file"))
                    if own is not None:
                        within = (own, int(match.group("line")))
        return None, within


def _installed(path: str) -> bool:
    parts = path.split(os.sep)
    return "site-packages" in parts or "dist-packages" in parts


def _current_autograd_node():
    import torch

    return torch._C._current_autograd_node()


def _is_custom_function(node) -> bool:
    import torch

    return isinstance(node, torch.autograd.function.BackwardCFunction)
