"""Budgets that do not depend on how busy the machine is.

A verdict must be the same on an idle laptop and on a loaded CI runner.  So the checker counts
work instead of wall-clock time:

* every Z3 call is bounded by Z3's resource limit (``rlimit``: a count of solver steps that is
  the same on every machine for the same query and Z3 version), ``RLIMIT_PER_SECOND`` steps
  for each second of budget;
* loops that stop at a deadline read this process's CPU time (``clock()``), which another
  process's load does not advance.

The command's wall-clock ``--timeout`` is only the outer bound (the CLI's deadline): reaching it
is reported as the timeout it is, never as a solver that gave up.
"""
from __future__ import annotations

import time
from typing import Optional

# Z3 steps per budget second: about what Z3 4.15 does per CPU second on the non-linear
# queries of this checker on a 2-core machine; only the product with a budget matters.
RLIMIT_PER_SECOND = 1_000_000


def clock() -> float:
    """CPU seconds this process has used (all threads): the checker's own work."""
    return time.process_time()


def rlimit(seconds: float) -> int:
    """The Z3 resource limit worth ``seconds`` of budget."""
    return max(1, int(seconds * RLIMIT_PER_SECOND))


# Some Z3 checks do not count their work in steps (seen: a cut query of a data-parallel loss divided by a
# count of tokens ran for minutes under a step limit worth 1 s).  Such a check is also stopped on the wall
# clock, this many times its budget and at least GUARD_MIN_S: far beyond what a check that counts its steps
# takes on a busy machine, so the answers of the checks that do count stay the same on every machine.
GUARD_FACTOR, GUARD_MIN_S = 30.0, 30.0


def bound(solver, steps: int) -> None:
    """Bound ``solver``'s next check by ``steps`` (``rlimit``): its step limit and the wall-clock guard."""
    solver.set("rlimit", steps)
    solver.set("timeout", int(1000 * max(GUARD_MIN_S, GUARD_FACTOR * steps / RLIMIT_PER_SECOND)))


def steps_used(solver) -> int:
    """The steps ``solver``'s Z3 context has taken so far.  Z3's ``rlimit count`` adds up over the
    whole context (every check of every solver in it), while a solver's ``rlimit`` bounds the steps of
    its next check from where the count is: a check's own steps are the count after it less the
    count before it."""
    statistics = solver.statistics()
    for key in statistics.keys():
        if key == "rlimit count":
            return int(statistics.get_key_value(key))
    return 0


class Budget:
    """One check's budget: ``seconds`` worth of solver steps, spent as the solver reports them,
    and as much CPU time for the work around the solver (symbolic runs, concrete screens).
    ``None``: unlimited."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.steps = None if seconds is None else rlimit(seconds)
        self.cpu_stop = None if seconds is None else clock() + seconds
        self._count_before = 0

    def spent(self) -> bool:
        return (self.steps is not None and self.steps <= 0) or (self.cpu_stop is not None and clock() > self.cpu_stop)

    def limit(self, solver, cap_seconds: Optional[float] = None) -> None:
        """Bound the next ``check()`` of ``solver`` by what is left (and by ``cap_seconds``)."""
        steps = [n for n in (self.steps, None if cap_seconds is None else rlimit(cap_seconds)) if n is not None]
        if steps:
            bound(solver, max(1, min(steps)))
        self._count_before = steps_used(solver)

    def charge(self, solver) -> None:
        """Count the steps the ``check()`` of ``solver`` since ``limit`` took."""
        if self.steps is not None:
            self.steps -= steps_used(solver) - self._count_before
