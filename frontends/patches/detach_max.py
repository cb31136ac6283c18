"""Candidate edit for a maximum all-reduced in place that autograd still differentiates.

Code that shifts logits by their maximum over a sharded dimension takes each rank's maximum and
all-reduces it with ``op=MAX`` in place (``dist.all_reduce(m, op=dist.ReduceOp.MAX)``).  The value is
then the global maximum, but autograd still sees the *local* ``max``: its gradient goes to the rank's
own arg-max, as if the local maximum were the shift.  A shift the result does not depend on (log-sum-exp,
softmax) has a zero gradient on one device; on a rank the terms that were all-reduced in place
(sums over the rank's own block) no longer cancel it, and the input's gradient is wrong.  Megatron
takes the maximum with no gradient; ``detach_max`` writes ``.detach()`` on the line that made it.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

_MAXIMA = ("max", "amax")


def _max_all_reduced(editor: SourceEditor, scope: cst.CSTNode) -> dict[str, set[int]]:
    """Names all-reduced in place with a MAX op in ``scope`` -> the lines that do it."""
    names: dict[str, set[int]] = {}
    for call in m.findall(scope, m.Call()):
        if call_name(call) != "all_reduce" or not call.args or not isinstance(call.args[0].value, cst.Name):
            continue
        if any("MAX" in editor.code(arg.value) for arg in call.args[1:]):
            names.setdefault(call.args[0].value.value, set()).add(editor.line_of(call))
    return names


def _targets(editor: SourceEditor, line: int) -> list[cst.Assign]:
    """Assignments ``m = <... .max(...) ...>`` (not detached) of a name the function all-reduces in place
    with MAX, made on ``line`` or all-reduced on it."""
    scope = editor.function_of(editor.statement_at(line))
    reduced = _max_all_reduced(editor, scope)
    found = []
    for assign in m.findall(scope, m.Assign(targets=[m.AssignTarget(target=m.Name())])):
        name, value = assign.targets[0].target.value, assign.value
        if name not in reduced or "detach" in editor.code(value):
            continue
        if not any(call_name(call) in _MAXIMA for call in m.findall(value, m.Call())):
            continue
        if editor.line_of(assign) == line or line in reduced[name]:
            found.append(assign)
    return found


def detach_max(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    for index in range(len(_targets(SourceEditor(source, path), site.line))):
        editor = SourceEditor(source, path)
        assign = _targets(editor, site.line)[index]
        value = editor.code(assign.value)
        simple = isinstance(assign.value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
        editor.replace(assign.value, cst.parse_expression(f"{value}.detach()" if simple else f"({value}).detach()"))
        name, line = assign.targets[0].target.value, editor.line_of(assign)
        yield (f"`{name}` on line {line} detached (all-reduced with MAX in place: autograd would differentiate "
               f"the rank's own maximum)", editor.render(), 1)
