"""Whether some output element can differ from the spec: Z3, one renaming class at a time.

The question is the disjunction of one disequality per output element.  Asked whole, non-linear
disequalities (a division by a block's absolute maximum, a clamp) can keep Z3 busy for its whole
time limit where each one alone takes milliseconds; and most elements ask the same question of
other unknowns (row 5's element is row 0's with row 5's inputs).  So:

1. the disequalities are sorted into renaming classes (``term_walk.Renamings``): two are in one
   class when renaming the unknowns of one (a bijection, sorts kept) gives the other, together
   with the dtype ranges of those unknowns.  A renaming of an unsatisfiable formula is
   unsatisfiable, so one disequality per class is asked;
2. with more than 8 classes (or claims too large to sort cheaply: more than 200,000 subterms
   walked), one call for all the disequalities first, as before (cheap when they are linear),
   within the time limit;
3. then (at once with fewer classes, or when that call did not decide) one call per class, all
   within the time limit again; the first satisfiable one gives the model.

Nothing is weakened: ``unsat`` means each class's disequality, with the ranges of its own
unknowns, has no solution, and so none of the elements' (the ranges of other unknowns are
satisfiable alone).  At most two time limits are spent deciding, and a satisfiable answer is
followed by a search for a witness with small inputs within a limit of its own: the two limits
the whole question had before, asked with small inputs first and then without.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import z3

from verifier.term_walk import Renamings, free_constants

GROUP_MIN_CLAIMS = 8  # fewer claims (or renaming classes) are asked one by one at once
CLASS_WALK_LIMIT = 200_000  # subterms walked to sort many claims into classes before the call for all
SMALL = 8  # a witness is looked for with every input in [-SMALL, SMALL] first


@dataclass
class Decision:
    status: Any  # z3.sat, z3.unsat or z3.unknown
    model: z3.ModelRef | None = None
    reason: str = ""  # Z3's reason for an unknown
    classes: int = 0  # distinct renaming classes among the disequalities
    calls: int = 0


def one_per_class(pairs: list[tuple[Any, Any]], fixed: frozenset[str] = frozenset()) -> list[tuple[Any, Any]]:
    """One ``(got, want)`` pair of each renaming class of ``got == want``: an identity proven for
    one holds for each renaming of it (a proof reads unknowns only as distinct, named things).
    Constants named in ``fixed`` (whose name means something: the verifier's infinities) are not
    renamed."""
    renamings = Renamings(fixed.__contains__)
    chosen: dict[int, tuple[Any, Any]] = {}
    for got, want in pairs:
        if not (z3.is_expr(got) and z3.is_expr(want)) or got.sort() != want.sort():
            return pairs
        chosen.setdefault(renamings.key(got == want)[0], (got, want))
    return list(chosen.values())


def decide(claims: list[Any], ranges: list[Any], inputs: set[int], timeout_ms: int,
           fixed: frozenset[str] = frozenset()) -> Decision:
    """Is some claim satisfiable under ``ranges`` (constraints each over one unknown)?  ``inputs``:
    the ids of the unknowns that are input elements (bounded to [-8, 8] for a readable witness
    first).  ``timeout_ms``: wall time for the call for all claims, and again for the calls one by one."""
    by_unknown: dict[int, Any] = {}
    for constraint in ranges:
        for unknown in free_constants(constraint):
            by_unknown[unknown.get_id()] = constraint

    def bounds_of(ids: list[int]) -> list:
        return [by_unknown[i] for i in ids if i in by_unknown]

    decision = Decision(z3.unsat)
    renamings = Renamings(fixed.__contains__)
    classes = _classes(claims, renamings, bounds_of, CLASS_WALK_LIMIT if len(claims) > GROUP_MIN_CLAIMS else None)
    if classes is None or len(classes) > GROUP_MIN_CLAIMS:
        deadline = time.monotonic() + timeout_ms / 1000.0
        unknowns = free_constants(z3.Or(*claims), fixed.__contains__)
        status = _ask(z3.Or(*claims), unknowns, bounds_of([u.get_id() for u in unknowns]), inputs, deadline,
                      timeout_ms, decision)
        if status != z3.unknown:
            return decision
        classes = classes if classes is not None else _classes(claims, renamings, bounds_of, None)
    decision.classes = len(classes)
    deadline = time.monotonic() + timeout_ms / 1000.0
    for claim in classes:
        unknowns = free_constants(claim, fixed.__contains__)
        status = _ask(claim, unknowns, bounds_of([u.get_id() for u in unknowns]), inputs, deadline, timeout_ms,
                      decision)
        if status != z3.unsat:
            return decision
    decision.status, decision.model = z3.unsat, None
    return decision


def _classes(claims: list[Any], renamings: Renamings, bounds_of: Any, limit: int | None) -> list[Any] | None:
    """One claim of each renaming class, in order; None once the walks over the claims have met
    more than ``limit`` subterms (large claims, where the call for all at once goes first)."""
    classes: dict[int, Any] = {}
    for claim in claims:
        if limit is not None and renamings.visited > limit:
            return None
        classes.setdefault(renamings.key(claim, bounds_of)[0], claim)
    return list(classes.values())


def _ask(claim: Any, unknowns: list, bounds: list, inputs: set[int], deadline: float, small_ms: int,
         decision: Decision) -> Any:
    """One call, stopped at ``deadline`` (monotonic time); on ``sat`` the model is one with small
    inputs when the solver finds one within ``small_ms`` (the time the search for a small witness
    had before)."""
    seconds = deadline - time.monotonic()
    if seconds <= 0:
        decision.status, decision.reason = z3.unknown, "canceled"
        return z3.unknown
    solver = z3.Solver()
    solver.set("timeout", max(1, int(seconds * 1000)))
    solver.add(claim, *bounds)
    decision.calls += 1
    status = solver.check()
    decision.status = status
    if status == z3.unknown:
        decision.reason = solver.reason_unknown()
        return status
    if status == z3.sat:
        decision.model = solver.model()
        small = [z3.And(u >= -SMALL, u <= SMALL) for u in unknowns if u.get_id() in inputs]
        if small:
            solver.push()
            solver.add(*small)
            solver.set("timeout", small_ms)
            if solver.check() == z3.sat:
                decision.model = solver.model()
            solver.pop()
    return status
