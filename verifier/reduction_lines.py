"""After which line a missing reduction goes: the line that made the partial sum.

A reduction dropped between a value's making and its use (``total = h.sum(-1)``, the
``dist.all_reduce(total)`` after it gone, ``centered = h - total / n`` below) leaves no op where it
was.  The values first go wrong at the reader, which stays the finding's line; the repair inserts
the collective after the line that made the partial sum (a patch's first changed line, for an
insertion, is the line it inserts after).  The recording says which line that is: the op that made
the value read as a partial sum of the ranks, looked through scalings by a constant (``total / n``
is still that partial sum, divided).  A value handed back unreduced (``emb`` made on line 29 and
returned on line 31) is read by the ``return``.

Said only when every such value comes from one line of the checked file above the reader's line,
made by no collective (a collective whose result is a partial sum is itself where the values go
wrong).  Only the recording's ops and lines are read.
"""
from __future__ import annotations

from typing import Iterable

from .ir import Op, Span

# an op of one tensor operand that scales it by a constant keeps a partial sum a partial sum
_SCALINGS = ("aten.div", "aten.mul", "aten.neg")
_SCALARS = ("aten.scalar_tensor.",)   # a Python number the recording wrapped: a constant, not an operand
_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "c10d")


def is_collective(op: Op) -> bool:
    """Whether ``op`` is a collective, by its kind (torch.distributed's wrappers and c10d's own ops)."""
    return any(word in op.kind for word in _COLLECTIVES)


def _maker(name: str, producer: dict[str, Op]) -> Op | None:
    """The op that made ``name``, looked through scalings by a constant (ops of one recorded operand)."""
    op = producer.get(name)
    for _ in range(16):
        if op is None:
            return None
        operands = [arg for arg in op.args if arg in producer and not producer[arg].kind.startswith(_SCALARS)]
        if not op.kind.startswith(_SCALINGS) or len(operands) != 1:
            return op
        op = producer[operands[0]]
    return None


def repair_after(reader: Span, partials: Iterable[str], producer: dict[str, Op]) -> int | None:
    """The checked file's line after which the reduction the partial sums ``partials`` miss goes, when
    ``reader`` (the span that read them) is a later line of the checked file; else None."""
    at, file = reader.place()
    partials = list(partials)
    if at is None or file is not None or not partials:
        return None
    lines = set()
    for name in partials:
        made = _maker(name, producer)
        if made is None or is_collective(made):
            return None
        line, made_file = made.span.place()
        if line is None or made_file is not None:
            return None
        lines.add(line)
    if len(lines) != 1:
        return None
    (line,) = lines
    return line if line < at else None
