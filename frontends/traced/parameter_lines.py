"""Where each parameter was made: the line of the user's file that was running when a module
registered it (``torch.nn.Module.register_parameter``, ``self.w = nn.Parameter(...)``, a layer built
inside a library called from that line).  A gradient that no collective reduces is named there: the
line that made the parameter is where it is marked (``sequence_parallel``) or its module swapped."""
from __future__ import annotations

import contextlib
from typing import Iterator

from torch.nn.modules.module import register_module_parameter_registration_hook

from verifier.ir import Span

from .spans import SpanFinder


class ParameterLines:
    def __init__(self) -> None:
        self._made: dict[int, tuple[object, Span]] = {}   # id -> (the parameter, kept alive; its span)

    @contextlib.contextmanager
    def watching(self, spans: SpanFinder) -> Iterator["ParameterLines"]:
        def registered(module, name, param):  # noqa: ARG001 - torch's hook signature
            if param is not None and id(param) not in self._made:
                span = spans.span()
                if span.line is not None:
                    self._made[id(param)] = (param, span)
            return None

        handle = register_module_parameter_registration_hook(registered)
        try:
            yield self
        finally:
            handle.remove()

    def of(self, param: object) -> Span:
        made = self._made.get(id(param))
        return made[1] if made is not None and made[0] is param else Span()
