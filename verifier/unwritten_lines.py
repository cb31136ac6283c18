"""Where a write into a fresh buffer belongs when the values first go wrong reading memory nothing wrote.

``output = torch.empty_like(x)`` makes a buffer for a collective to fill (``all_to_all_single(output, x)``),
and a later statement reads ``output``.  Without that write the read computes from memory nothing wrote,
and the culprit walk finds the allocation (``traced_check._unwritten_read``): the write goes after it.
That is not the whole answer when, between the allocation and the read, the frame ran the body of a
compound statement that began after the allocation (``if seq_world_size > 1:``, whose ``else`` binds the
name to the input on one device): the work that belongs only to that branch is done there, and a write
placed right after the allocation would run where the branch does not.  The recording knows, for a read of
a name bound earlier in the same frame, the last statement that frame ran before the reading statement and
the compound statement whose body holds it (``Span.after``).  When that compound statement began after the
allocation and after the line that bound the name the read uses (a line of the same frame that made the
value it holds: the allocation, or a view of it; not a call that handed a buffer back), and before the
read, the finding names that last statement: the missing write goes after it, inside the branch that ran.
Otherwise the allocation stays the answer (a statement of the same block between the two says nothing of
where the write goes).
"""
from __future__ import annotations

from .ir import Op, Span
from .traced_ir import UNINITIALISED


def write_slot(reader: Op, unwritten: Op, producer: dict[str, Op]) -> Op | None:
    """The place a missing write belongs, as an op for the finding, or None when the recording does not
    determine one (see the module's docstring).  ``reader``: the op that read memory nothing wrote;
    ``unwritten``: the walk's finding, whose result is the allocation's; ``producer``: value name -> the op
    that made it."""
    allocation = producer.get(unwritten.results[0]) if unwritten.results else None
    after = reader.span.after
    if allocation is None or allocation.kind not in UNINITIALISED:
        return None
    read_line, read_file = reader.span.place()
    made_line, made_file = allocation.span.place()
    if after is None or read_line is None or made_line is None or made_file != read_file:
        return None
    # the name the read uses was bound by the statement that made the value it holds (the allocation, or a
    # view of it): made in the reader's own frame, not handed back by a call
    lines = {line for value, _, line in reader.span.bound
             if value in reader.args and _made_from(value, allocation, producer)
             and producer[value].span.place() == reader.span.moved_to(line).place()}
    if len(lines) != 1:
        return None
    bound_line = lines.pop()
    if made_line > bound_line:
        return None
    line, block = after
    if block is None or not max(bound_line, made_line) < block < read_line or not block < line < read_line:
        return None
    span: Span = reader.span.moved_to(line)
    kind = (f"memory allocated by {allocation.kind} at {allocation.span.where()} that nothing wrote before "
            f"{reader.kind} read it at {reader.span.where()}: the write belongs in the branch that ran between "
            f"them (from line {block}), after its last statement that ran")
    return Op(allocation.results, kind, (), {}, span)


def _made_from(value: str, allocation: Op, producer: dict[str, Op], depth: int = 8) -> bool:
    """``value`` is the allocation's result, or a value made from it through ops of one operand (a view)."""
    for _ in range(depth):
        if value in allocation.results:
            return True
        op = producer.get(value)
        if op is None or len(op.args) != 1:
            return False
        value = op.args[0]
    return False
