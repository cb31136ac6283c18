"""Where a wrong pick out of a Python list goes: the line whose subscript chose what a rank computes with.

``mine = layers[rank * per_stage:(rank + 1) * per_stage]`` picks a pipeline stage's layers with no op torch
records, so a slice one layer off shows first at the matmul that applies a layer the stage should not: an op
whose operands each agree with one device's values.  The traced frontend keeps, on an op's span, the earlier
line of the checked file whose subscript picked an operand (``Span.picked``).  That line is where the repair
goes when the ranks' picks there are no sharing of one device's: one device's ops read some values through
that pick, and the ranks' ops read, as one device's values, neither all of them on every rank (replicated)
nor each of them on exactly one rank (a partition: pipeline stages, shards), but one on two ranks or on none.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

from .ir import Op
from .traced_ir import TracedProgram

Pairing = Callable[[tuple[Op, ...]], dict[str, str]]   # a rank's ops -> rank value name -> one device's


def _read_through(ops: tuple[Op, ...], line: int) -> set[str]:
    """The values the ops (run in the checked file) read through the pick at ``line``."""
    return {name for op in ops if op.span.within is None for name, _, at in op.span.picked if at == line}


def mispicked(program: TracedProgram, op: Op | None, pairing: Pairing) -> tuple[str, int, str] | None:
    """(variable, line, how the ranks' picks part from one device's) for the one earlier line of the checked
    file whose subscript picked what the culprit ``op`` reads, when the ranks' picks there are no sharing of
    one device's; None otherwise (no pick, several, or the values cannot be told apart)."""
    if op is None or op.span.within is not None or not op.span.picked:
        return None
    places = {(variable, line) for _, variable, line in op.span.picked if line != op.span.line}
    if len(places) != 1:
        return None
    variable, line = places.pop()
    want = _read_through(program.reference, line)
    if not want:
        return None
    per_rank = []
    for ops in program.ranks:
        made = {name for o in ops for name in o.results}
        try:
            pairs = pairing(ops)
        except (KeyError, TypeError, ValueError):
            return None
        # a value made by an op stands for its paired counterpart; an input is the same value on every run
        names = {pairs.get(name) if name in made else name for name in _read_through(ops, line)}
        if None in names:
            return None
        per_rank.append(names)
    if all(names == want for names in per_rank):
        return None   # replicated: every rank picks what one device does
    count = Counter(name for names in per_rank for name in names)
    twice = sum(1 for name in want if count[name] > 1)
    never = sum(1 for name in want if count[name] == 0)
    other = sum(1 for name in count if name not in want)
    if not (twice or never or other):
        return None   # a partition of one device's picks
    parts = [f"{twice} on more than one rank"] if twice else []
    parts += [f"{never} on none"] if never else []
    parts += [f"{other} value(s) one device does not read there"] if other else []
    how = (f"of the {len(want)} value(s) one device's ops read through that pick, the {program.world} ranks' ops read "
           f"{' and '.join(parts)}: neither every rank all of them nor each on one rank")
    return variable, line, how
