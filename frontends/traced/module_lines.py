"""Which installed module's ``forward`` each recorded op ran in, and the user's line that built it.

An installed layer (megatron-core's ``ColumnParallelLinear``, fairscale's ``RowParallelLinear``) decides
its own communication from flags given where it is built (``gather_output``, ``input_is_parallel``): the
gather or split it runs is code the user cannot edit, so a wrong one is repaired where the layer is
built.  While the user's code runs, torch's global module hooks keep, for each module whose class is
installed code and whose parameters were all made at one line of the checked file
(``ParameterLines``), the range of recorded ops its ``forward`` ran (``Recording.module_lines``)."""
from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Iterator

from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from .parameter_lines import ParameterLines
from .recorder import Recorder
from .spans import _installed


@functools.lru_cache(maxsize=None)
def _installed_class(cls: type) -> bool:
    try:
        path = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return False
    return bool(path) and _installed(path)


def built_at(module, made: ParameterLines) -> int | None:
    """The one line of the checked file that made every parameter of ``module`` (None: several, or none)."""
    lines = {made.of(param).line for param in module.parameters()}
    if len(lines) != 1 or None in lines:
        return None
    span = next(made.of(param) for param in module.parameters())
    return span.line if span.within is None else None


@contextlib.contextmanager
def module_lines(recorder: Recorder, made: ParameterLines | None) -> Iterator[None]:
    """Record (first op, end op, line that built it) of each installed module's forward run; a forward
    the run left by raising ends at the last op recorded."""
    if made is None:
        yield
        return
    ranges = recorder.recording.module_lines
    open_: list[tuple[object, int | None]] = []   # (module, its index in ranges or None) per running forward
    lines: dict[int, tuple[object, int | None]] = {}   # id -> (the module, kept alive; its building line)

    def line_of(module) -> int | None:
        known = lines.get(id(module))
        if known is None or known[0] is not module:
            known = lines[id(module)] = (module, built_at(module, made) if _installed_class(type(module)) else None)
        return known[1]

    def before(module, args):  # noqa: ARG001 - torch's hook signature
        line = line_of(module)
        index = None
        if line is not None:
            index = len(ranges)
            ranges.append((len(recorder.recording.ops), None, line))
        open_.append((module, index))
        return None

    def after(module, args, output):  # noqa: ARG001 - torch's hook signature
        while open_:
            running, index = open_.pop()
            if index is not None:
                start, _, line = ranges[index]
                ranges[index] = (start, len(recorder.recording.ops), line)
            if running is module:
                break
        return None

    handles = [register_module_forward_pre_hook(before), register_module_forward_hook(after)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        for _, index in open_:   # left by a raise: up to the last op recorded
            if index is not None:
                start, _, line = ranges[index]
                ranges[index] = (start, len(recorder.recording.ops), line)


def innermost(ranges: list[tuple[int, int | None, int]], position: int) -> int | None:
    """The line that built the innermost installed module whose forward ran op ``position``."""
    around = [(end - start, line) for start, end, line in ranges
              if end is not None and start <= position < end]
    return min(around)[1] if around else None
