"""Where a missing exchange of blocks belongs (an all-to-all dropped, or replaced by a local copy).

A sequence-to-head reshard lays the rank's blocks out for the exchange (reshape, transpose, cat),
exchanges them (``all_to_all_single`` into a fresh buffer, or a Function returning the exchanged
tensor), and lays the result out again.  With the exchange gone, the culprit walk stops at the
first layout op: its result is no block of the single device's value (nor is it in the correct
program, where the exchange fixes it), though it computes nothing wrong.  The recording tells more:

* the rank's output holds only elements of its own input blocks, while one device's block of the
  output holds elements of other ranks' blocks: data had to come from another rank and none did;
* every op from the inputs to the output moves data only (views, transposes, copies, cats,
  splits), and none is a collective;
* on that path, the steps that move the blocks unchanged in shape, where an exchange fits without
  changing anything else, are a copy into a buffer just allocated (``out.copy_(x)`` where the
  collective filled ``out``) and a name bound to a value made on an earlier line
  (``output = concat_tensor`` where the collective's result was bound).  Copies are the stronger
  evidence: a name bound to a value made on earlier lines may be bound to a call's result
  (``input_t = layout(input)``), so names count only when the path has no such copy.

When exactly one such step exists it is named (the layout op stays in the message); else nothing
is said and the walk's culprit stands.  Only concrete values of the screening run are read.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .ir import Op, Span
from .traced_ir import UNINITIALISED, Comparison, TracedProgram

# ops that only move or keep elements (their results hold elements of their operands, nothing computed)
_MOVES = ("aten.view.", "aten._unsafe_view.", "aten.reshape.", "aten.transpose.", "aten.permute.", "aten.t.",
          "aten.clone.", "aten.contiguous.", "aten.alias.", "aten.detach.", "aten.cat.", "aten.stack.",
          "aten.split", "aten.chunk.", "aten.unbind.", "aten.slice.", "aten.select.", "aten.narrow.",
          "aten.squeeze", "aten.unsqueeze.", "aten.flatten.", "aten.unflatten.", "aten.expand.",
          "aten.copy_.", "aten.lift_fresh")


def missing_exchange(program: TracedProgram, env: dict[str, Any], want: Any, comparison: Comparison,
                     rank: int, found: Op) -> Op | None:
    """The step named for a missing exchange of the compared output on ``rank`` (see the module's
    docstring), or None.  ``env``: the rank's concrete values; ``want``: one device's block the rank
    should hold; ``found``: the culprit walk's op."""
    name = comparison.per_rank[rank] if rank < len(comparison.per_rank) else None
    if comparison.kind != "output" or name is None or program.world < 2:
        return None
    ops = program.ranks[rank]
    producer = {result: op for op in ops for result in op.results}
    path = _ancestors(name, producer)
    if path is None or found not in path:
        return None
    own = [env[r] for op in path if op.attr("layout_source") is not None for r in op.results if r in env]
    if not own or name not in env or not _only_others_missing(env[name], want, own):
        return None
    copies, rebindings = _slots(path, producer, comparison, name)
    slots = copies or rebindings   # a copy into a fresh buffer first: a name may be bound to a call's result
    if len(slots) != 1:
        return None
    ((span, how),) = slots.items()
    kind = (f"a missing exchange of blocks ({found.kind} at {found.span.where()} lays out the rank's own blocks; "
            f"the output holds only elements of the rank's own input, where one device's block holds other ranks' "
            f"too, and no collective ran): {how} moves the blocks unchanged in shape, where the exchange belongs")
    return Op(found.results, kind, (), {}, span)


def _ancestors(name: str, producer: dict[str, Op]) -> list[Op] | None:
    """The ops ``name`` is made from, when all of them only move elements (allocations as copies'
    destinations, the recorder's cuts of the inputs); None when any computes or communicates."""
    seen: dict[int, Op] = {}
    todo = [name]
    while todo:
        op = producer.get(todo.pop())
        if op is None or id(op) in seen:
            continue
        if not (op.kind.startswith(_MOVES) or op.kind in UNINITIALISED):
            return None
        seen[id(op)] = op
        todo.extend(op.args)
    return list(seen.values())


def _only_others_missing(got: Any, want: Any, own: list[Any]) -> bool:
    """Every element of the rank's value is one of its own inputs' elements, and one device's block
    holds elements the rank was never given (other ranks' blocks)."""
    try:
        got, want = np.asarray(got), np.asarray(want)
        mine = np.concatenate([np.asarray(v, dtype=float).reshape(-1) for v in own])
        if got.dtype.kind not in "fiu" or want.dtype.kind not in "fiu" or not got.size:
            return False
        return bool(np.isin(got.astype(float), mine).all() and not np.isin(want.astype(float), mine).all())
    except (TypeError, ValueError):
        return False


def _slots(path: list[Op], producer: dict[str, Op], comparison: Comparison,
           name: str) -> tuple[dict[Span, str], dict[Span, str]]:
    """The steps of the path that move blocks unchanged in shape: copies into a fresh allocation, and
    names bound to a value made on an earlier line of the same file (the output's ``return`` too; the
    line may also be a call whose ops ran on those earlier lines, so these are the weaker evidence)."""
    on_path = {result for op in path for result in op.results}
    copies: dict[Span, str] = {}
    rebindings: dict[Span, str] = {}
    for op in path:
        if op.kind.startswith("aten.copy_.") and len(op.args) >= 2 and op.args[1] in on_path:
            made = producer.get(op.args[0])
            if made is not None and made.kind in UNINITIALISED:
                copies[op.span] = f"the copy into a buffer just allocated ({op.span.where()})"
        for value, variable, line in op.span.bound:
            rebound = _rebinding(op.span, value, line, on_path, producer)
            if rebound is not None:
                rebindings[rebound] = f"the line that bound {variable} to a value made before it ({rebound.where()})"
    if len(comparison.span.bound) == 1:   # the output returned under a name bound on an earlier line
        ((_, variable, line),) = comparison.span.bound
        rebound = _rebinding(comparison.span, name, line, on_path, producer)
        if rebound is not None:
            rebindings[rebound] = (f"the line that bound {variable}, returned, to a value made before it "
                                   f"({rebound.where()})")
    return copies, rebindings


def _rebinding(span: Span, value: str, line: int, on_path: set[str], producer: dict[str, Op]) -> Span | None:
    """``span``'s statement read ``value`` through a name bound at ``line`` of its frame, and the op that
    made ``value`` ran on an earlier line of the same frame: that line bound a value it did not make."""
    made = producer.get(value)
    if value not in on_path or made is None:
        return None
    at = span.moved_to(line)
    made_line, made_file = made.span.place()
    line_file = at.place()[1]
    if made_line is None or made_file != line_file or made_line >= line:
        return None
    return at
