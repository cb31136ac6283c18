"""Where an all-to-all that delivers the wrong elements goes wrong: the layout of its send buffer.

An all-to-all sends block j (along dim 0) of every rank's send buffer to rank j.  Sequence parallelism lays
a rank's value out for it (reshapes, permutes, copies), exchanges, and lays the result out again; the values
in between have shapes no block of one device's, which the culprit walk cannot judge, so it stops at the
first value after the exchange that can be compared.  Whether the layout before the exchange or the one
after it is wrong, the values mostly cannot tell: the single device runs the same (possibly wrong) layout
code, so its value there is no independent target.  Two recorded facts together can:

* on the single device the layout run gives its input back: from the compared value on, through ops that
  only move elements, one device's values reach the very value the rank's layout run started from (an
  all-to-all on one device is the identity, and a right reshard gives its input back there).  Then one
  device's value at the compared op is a faithful target, not one the layout scrambled;
* the rank's compared value, made from the received buffer by moves only, holds other elements than its
  block of that target (not the same elements in another order).  Moves after the exchange cannot bring a
  rank elements it was not sent: the send buffer was laid out wrong.

Then the first of the moves that made the send buffer from the last value agreeing with one device's is
named (where the value leaves one device's layout).  Else nothing is said (the walk's op stands): a wrong
order of the right elements, or a layout that scrambles one device's values too, may be wrong before the
exchange or after it.  Exchanges with uneven split sizes are left alone (the sizes may route the elements).
Only concrete values of the screening run are read.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .ir import Op

# ops whose result holds exactly its operand's elements (each once), in some order
_KEEPS = ("aten.view.", "aten._unsafe_view.", "aten.reshape.", "aten.transpose.", "aten.permute.", "aten.t.",
          "aten.clone.", "aten.contiguous.", "aten.alias.", "aten.detach.", "aten.squeeze", "aten.unsqueeze.",
          "aten.flatten.", "aten.unflatten.", "aten.lift_fresh", "aten.copy_.")
_DEPTH = 16


def misrouted(ops: tuple[Op, ...], env: dict[str, Any], reference_ops: tuple[Op, ...], reference: dict[str, Any],
              pairs: dict[str, str], found: Op, block: Callable[[str], Any], agrees: Callable[[str], bool],
              close: Callable[[Any, Any], bool]) -> Op | None:
    """The first move that laid out the send buffer of an all-to-all that delivered the wrong elements (see
    the module's docstring), as an op for the finding, or None.  ``env``/``reference``: the rank's and one
    device's concrete values; ``pairs``: rank value -> one device's value it stands for; ``block(name)``:
    one device's block the rank's value ``name`` should equal; ``agrees(name)``: the rank's value equals it."""
    producer = {result: op for op in ops for result in op.results}
    if not found.results or found.results[0] not in env:
        return None
    exchange = _received_through_moves(found, producer)
    if exchange is None or not exchange.args or exchange.attr("input_split_sizes") is not None \
            or exchange.attr("output_split_sizes") is not None:
        return None
    chain, start = [], exchange.args[0]
    for _ in range(_DEPTH):
        if agrees(start):
            break
        op = producer.get(start)
        source = _source(op)
        if source is None:
            return None
        chain.append(op)
        start = source
    else:
        return None
    if not chain or not _gives_back(pairs.get(found.results[0]), pairs.get(start), reference_ops, reference, close):
        return None
    try:
        got, want = np.asarray(env[found.results[0]]), np.asarray(block(found.results[0]))
        if got.shape != want.shape or got.dtype.kind not in "fiu" or want.dtype.kind not in "fiu" or not got.size:
            return None
        if close(np.sort(got.astype(float), axis=None), np.sort(want.astype(float), axis=None)):
            return None   # the right elements, in another order: before or after the exchange, unknown
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    first = chain[-1]
    kind = (f"the layout of an all-to-all's send buffer ({exchange.span.where()}): after the exchange the rank "
            f"holds other elements than its block of one device's value ({found.kind} at {found.span.where()} "
            f"only moves what arrived; one device's layout gives its input back), so the moves from "
            f"{first.kind} on sent the ranks the wrong blocks")
    return Op(first.results, kind, (), {}, first.span)


def _gives_back(value: str | None, source: str | None, reference_ops: tuple[Op, ...], reference: dict[str, Any],
                close: Callable[[Any, Any], bool]) -> bool:
    """One device's ``value``, or a value made from it by moves only, equals its ``source`` (same shape)."""
    if value is None or source is None or source not in reference:
        return False
    want = np.asarray(reference[source])
    readers: dict[str, list[Op]] = {}
    for op in reference_ops:
        moved = _source(op)
        if moved is not None:
            readers.setdefault(moved, []).append(op)
    todo, seen = [(value, 0)], set()
    while todo:
        name, depth = todo.pop()
        if name in seen or depth > _DEPTH:
            continue
        seen.add(name)
        held = reference.get(name)
        try:
            if held is not None and name != source and np.shape(held) == want.shape and close(np.asarray(held), want):
                return True
        except (TypeError, ValueError):
            pass
        todo.extend((result, depth + 1) for op in readers.get(name, ()) for result in op.results)
    return False


def _received_through_moves(found: Op, producer: dict[str, Op]) -> Op | None:
    """The all-to-all whose received buffer ``found`` is made from by moves that keep every element."""
    op: Op | None = found
    for _ in range(_DEPTH):
        if op is None:
            return None
        if op.kind == "all_to_all":
            return op
        source = _source(op)
        if source is None:
            return None
        op = producer.get(source)
    return None


def _source(op: Op | None) -> str | None:
    """The one operand whose elements ``op``'s result holds, when it only moves them; else None."""
    if op is None or not op.kind.startswith(_KEEPS) or not op.args:
        return None
    if op.kind.startswith("aten.copy_."):   # copy_(destination, source)
        return op.args[1] if len(op.args) >= 2 else None
    return op.args[0]
