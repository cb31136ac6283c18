"""Candidate edits for point-to-point calls posted in another order than their partners: a pipeline
whose receiving stage posts the receive of microbatch 1 before microbatch 0 while the sending stage
sends 0 first (blocking ``send``/``recv`` under gloo wait for each other for ever).

The traced run's ``deadlock`` finding names the blocked calls' lines.  At such a line, a send or
receive inside ``for mb in (1, 0):`` (a literal tuple or list) or ``for mb in reversed(...)`` is
the loop to reorder, when the same function runs its partner (a receive for a send, a send for a
receive) in another loop over the same values in a different order: that loop's order is written
in, ``reversed(...)`` is dropped or added to match.  Either side may be the one to change; both are
offered and each candidate is traced, proven and run on real gloo ranks before it is shown.
"""
from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import CannotPatch, SourceEditor, call_name

_SENDS = ("send", "isend")
_RECVS = ("recv", "irecv")


def _loop_of(editor: SourceEditor, node: cst.CSTNode) -> cst.For | None:
    """The innermost ``for`` around ``node`` (inside the same function)."""
    current = editor.parents.get(node)
    while current is not None and not isinstance(current, (cst.For, cst.FunctionDef)):
        current = editor.parents.get(current)
    return current if isinstance(current, cst.For) else None


def _order(editor: SourceEditor, loop: cst.For) -> tuple[tuple[str, ...], bool] | None:
    """(the loop's values as written, reversed?) for ``for x in (a, b)`` / ``[a, b]`` /
    ``reversed(SEQ)``; None for any other loop."""
    iterable = loop.iter
    backwards = False
    if isinstance(iterable, cst.Call) and call_name(iterable) == "reversed" and len(iterable.args) == 1:
        iterable, backwards = iterable.args[0].value, True
    if isinstance(iterable, (cst.Tuple, cst.List)):
        values = tuple(editor.code(e.value) for e in iterable.elements)
        return (values[::-1] if backwards else values), backwards
    if backwards:   # reversed(range(n)) and the like: only the direction is known
        return (f"reversed({editor.code(iterable)})",), True
    return None


def _kind(statement: cst.CSTNode) -> str | None:
    """"send" or "recv" for a statement that posts one side of point-to-point."""
    names = {call_name(c) for c in m.findall(statement, m.Call())}
    if names & set(_SENDS):
        return "send"
    if names & set(_RECVS):
        return "recv"
    return None


def _partner_loops(editor: SourceEditor, loop: cst.For, kind: str) -> list[cst.For]:
    """Other loops of the function whose body posts the other side of point-to-point."""
    want = "recv" if kind == "send" else "send"
    scope = editor.function_of(loop)
    return [other for other in m.findall(scope, m.For()) if other is not loop and _kind(other.body) == want]


def _rewritten(editor: SourceEditor, loop: cst.For, target: cst.For) -> str | None:
    """``loop``'s iterable spelled in ``target``'s order (the same values), or None."""
    mine, theirs = _order(editor, loop), _order(editor, target)
    if mine is None or theirs is None or mine[0] == theirs[0]:
        return None
    if sorted(mine[0]) == sorted(theirs[0]) and not mine[1] and not theirs[1]:
        return "(" + ", ".join(theirs[0]) + (",)" if len(theirs[0]) == 1 else ")")
    if mine[1] != theirs[1]:   # one walks reversed(...), the other forwards over the same sequence
        inner = loop.iter.args[0].value if mine[1] else loop.iter
        other = target.iter.args[0].value if theirs[1] else target.iter
        if editor.code(inner) == editor.code(other):
            return editor.code(inner) if mine[1] else f"reversed({editor.code(inner)})"
    return None


def match_order(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    try:
        statement = probe.statement_at(site.line)
    except CannotPatch:
        return
    kind = _kind(statement)
    loop = _loop_of(probe, statement) if kind else None
    if loop is None or _order(probe, loop) is None:
        return
    for partner in _partner_loops(probe, loop, kind):
        # the loop at the named line takes its partner's order, and the partner takes this one's
        for mover, model in ((loop, partner), (partner, loop)):
            spelled = _rewritten(probe, mover, model)
            if spelled is None:
                continue
            editor = SourceEditor(source, path)
            line = probe.line_of(mover)
            node = next(f for f in m.findall(editor.module, m.For()) if editor.line_of(f) == line)
            old = editor.code(node.iter)
            editor.replace(node.iter, cst.parse_expression(spelled))
            which = "receives" if _kind(mover.body) == "recv" else "sends"
            yield (f"post the {which} of line {line} in the order of their partners on line "
                   f"{probe.line_of(model)}: `for {editor.code(node.target)} in {old}` -> `{spelled}`",
                   editor.render(), 0 if mover is loop else 1)
