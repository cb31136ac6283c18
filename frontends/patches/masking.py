"""Candidate edits for a vocabulary-parallel lookup: foreign ids masked, and the mask's bounds.

A rank owns rows ``[start, start + rows)`` of a vocabulary-sharded table; an id outside that range
must be looked up as some valid row and its result zeroed before the partial results are summed over
the ranks.  Two ways this goes wrong, each with its edit at the recorded line:

* ``mask_ids``     a lookup ``F.embedding(ids - start, weight)`` (or ``weight[ids - start]``) with no
                   mask: ``mask = (ids < start) | (ids >= start + weight.shape[0])`` before it, the
                   shifted ids ``masked_fill``-ed to 0, and the looked-up rows zeroed after it;
* ``mask_bounds``  a range comparison of the enclosing function off by one: ``<=`` <-> ``<``,
                   ``>=`` <-> ``>`` on a comparison with an id range bound.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

import re
from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

_BOUND = re.compile(r"start|end|first|last|offset|vocab|lo\b|hi\b", re.I)
_FLIP = {cst.LessThanEqual: cst.LessThan, cst.LessThan: cst.LessThanEqual,
         cst.GreaterThanEqual: cst.GreaterThan, cst.GreaterThan: cst.GreaterThanEqual}


def _shift(node: cst.BaseExpression) -> cst.BinaryOperation | None:
    """``ids - start`` in an index expression (also inside ``(ids - start).clamp(0, rows - 1)``)."""
    if m.matches(node, m.BinaryOperation(operator=m.Subtract())):
        return node
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value in ("clamp", "clamp_", "clip", "long", "to"):
        return _shift(node.func.value)
    return None


def _lookups(statement: cst.CSTNode) -> list[tuple[cst.BaseExpression, cst.BinaryOperation, cst.BaseExpression]]:
    """(index expression, its shift ``ids - start``, table) of each lookup on the statement."""
    found = []
    for call in m.findall(statement, m.Call()):
        name = call_name(call)
        if name == "embedding" and len(call.args) >= 2 and _shift(call.args[0].value) is not None:
            found.append((call.args[0].value, _shift(call.args[0].value), call.args[1].value))
    for sub in m.findall(statement, m.Subscript()):
        if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index) and \
                _shift(sub.slice[0].slice.value) is not None:
            found.append((sub.slice[0].slice.value, _shift(sub.slice[0].slice.value), sub.value))
    return found


def _is_lookup_line(source: str, path: str, site) -> bool:
    return bool(_lookups(SourceEditor(source, path).statement_at(site.line)))


def mask_ids(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    from .at_line import _assigned

    probe = SourceEditor(source, path)
    lookups = _lookups(probe.statement_at(site.line))
    if not lookups:
        return
    function = probe.function_of(probe.statement_at(site.line))
    if any(isinstance(c.operator, (cst.LessThan, cst.GreaterThanEqual)) for c in m.findall(function, m.ComparisonTarget())):
        return   # the function masks already: mask_bounds looks at how
    editor = SourceEditor(source, path)
    statement = editor.statement_at(site.line)
    name = _assigned(statement)
    if name is None:
        return
    index, shifted, table = _lookups(statement)[0]
    ids, start, rows = editor.code(shifted.left), editor.code(shifted.right), editor.code(table)
    mask, local = editor.fresh_name("foreign"), editor.fresh_name("local_ids")
    editor.insert_before(statement, f"{mask} = ({ids} < {start}) | ({ids} >= {start} + {rows}.shape[0])",
                         f"{local} = ({ids} - {start}).masked_fill({mask}, 0)")
    editor.replace(index, cst.Name(local))
    editor.insert_after(statement, f"{name} = {name}.masked_fill({mask}.unsqueeze(-1), 0.0)")
    yield (f"mask the ids outside this rank's rows on line {site.line} (looked up as row 0, then zeroed)",
           editor.render(), 0 if site.op in ("embedding", "index", "clamp", "clip", "") else 1)


def mask_bounds(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    statement = probe.statement_at(site.line)
    function = probe.function_of(statement)
    on_lookup = bool(_lookups(statement)) or site.op in ("embedding", "index")
    comparisons = [c for c in m.findall(statement, m.Comparison())] or \
        ([c for c in m.findall(function, m.Comparison())] if on_lookup and function is not probe.module else [])
    for index, comparison in enumerate(comparisons):
        for target_index, target in enumerate(comparison.comparisons):
            flipped = _FLIP.get(type(target.operator))
            if flipped is None or not _BOUND.search(probe.code(target.comparator) + probe.code(comparison.left)):
                continue
            editor = SourceEditor(source, path)
            statement = editor.statement_at(site.line)
            scope = editor.function_of(statement)
            fresh = [c for c in m.findall(statement, m.Comparison())] or [c for c in m.findall(scope, m.Comparison())]
            this = fresh[index].comparisons[target_index]
            operator = flipped(whitespace_before=this.operator.whitespace_before,
                               whitespace_after=this.operator.whitespace_after)
            editor.replace(this.operator, operator)
            old = probe.code(target.operator).strip()
            new = cst.Module([]).code_for_node(operator).strip()
            line = probe.line_of(comparison)
            yield f"`{old}` -> `{new}` in the id range check on line {line}", editor.render(), 1 if on_lookup else 3
