"""Where each parameter was made: the line of the user's file that was running when a module
registered it (``torch.nn.Module.register_parameter``, ``self.w = nn.Parameter(...)``, a layer built
inside a library called from that line).  A gradient that no collective reduces is named there: the
line that made the parameter is where it is marked (``sequence_parallel``) or its module swapped.

A parameter a tensor-parallel style distributes (``parallelize_module`` registers the DTensor) was
made by that style: its line is the line that made the style (the plan's ``ColwiseParallel()``), where
its placements are chosen."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from torch.nn.modules.module import register_module_parameter_registration_hook

from verifier.ir import Span

from .spans import SpanFinder


class ParameterLines:
    def __init__(self) -> None:
        self._made: dict[int, tuple[object, Span]] = {}   # id -> (the parameter, kept alive; its span)

    @contextlib.contextmanager
    def watching(self, spans: SpanFinder) -> Iterator["ParameterLines"]:
        styles: dict[int, tuple[object, Span]] = {}

        def registered(module, name, param):  # noqa: ARG001 - torch's hook signature
            if param is not None and id(param) not in self._made:
                span = _style_applying(styles) or spans.span()
                if span.line is not None:
                    self._made[id(param)] = (param, span)
            return None

        handle = register_module_parameter_registration_hook(registered)
        try:
            with _styles_made(spans, styles):
                yield self
        finally:
            handle.remove()

    def made(self) -> Iterator[tuple[object, Span]]:
        """Every parameter registered while watched, with the line that made it."""
        return iter(list(self._made.values()))

    def of(self, param: object) -> Span:
        made = self._made.get(id(param))
        return made[1] if made is not None and made[0] is param else Span()


_WATCHERS: list[tuple[SpanFinder, dict]] = []   # the active watchers (innermost last)


@contextlib.contextmanager
def _styles_made(spans: SpanFinder, styles: dict) -> Iterator[None]:
    """Keep the user's line that made each tensor-parallel style (torch's ``ParallelStyle``)."""
    if not _watch_style_construction():
        yield
        return
    _WATCHERS.append((spans, styles))
    try:
        yield
    finally:
        _WATCHERS.remove((spans, styles))


def _watch_style_construction() -> bool:
    """Give ``ParallelStyle`` a ``__new__`` that tells the active watcher, once per process and never
    removed: deleting a ``__new__`` set on a class leaves its subclasses calling ``object.__new__``
    with the constructor's arguments, so ``ColwiseParallel(use_local_output=False)`` would raise
    afterwards."""
    try:
        from torch.distributed.tensor.parallel.style import ParallelStyle
    except ImportError:
        return False
    if getattr(ParallelStyle.__dict__.get("__new__"), "__func__", None) is _new_style:
        return True
    if "__new__" in ParallelStyle.__dict__:   # torch defines one: leave it
        return False
    ParallelStyle.__new__ = staticmethod(_new_style)
    return True


def _new_style(cls, *args, **kwargs):  # noqa: ARG001 - the constructor's arguments go to __init__
    style = object.__new__(cls)
    if _WATCHERS:
        spans, styles = _WATCHERS[-1]
        span = spans.span()
        if span.line is not None:
            styles[id(style)] = (style, span)
    return style


def _style_applying(styles: dict) -> Span | None:
    """The line that made the style whose ``_apply`` is on the stack (it registers the parameter)."""
    if not styles:
        return None
    frame = sys._getframe(2)
    while frame is not None:
        style = frame.f_locals.get("self") if frame.f_code.co_name == "_apply" else None
        made = styles.get(id(style)) if style is not None else None
        if made is not None and made[0] is style:
            return made[1]
        frame = frame.f_back
    return None
