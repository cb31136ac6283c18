"""A difference the verifier's model found, and what torch said when the code ran with it.

The traced check finds differences by evaluating its own model of the recorded ops (NumPy
rules, Z3 encodings).  A model can be wrong where torch is not, so a difference becomes a
violation only after the user's code has run for real with the counterexample, once on one
device and once on the parallel ranks, and torch's numbers differ too.  Running user code is
the application's business: ``check_traced`` takes a ``Confirm`` callable from its caller and
the verifier itself runs nothing.

Outcomes: ``REPRODUCED`` (torch differs too: a violation, shown with torch's values),
``AGREES`` (torch computes the same on one device and on the ranks: the verifier's model is
wrong, a defect of ours, and the verdict is ``unsupported``), ``NOT_RUN`` (the code could not
be run with the counterexample: ``unsupported`` with the reason).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .ir import Op

REPRODUCED, AGREES, NOT_RUN = "reproduced", "agrees", "not-run"


@dataclass(frozen=True)
class Finding:
    """What the model says: ``label`` differs on ``rank`` at ``index`` for these leaf values."""

    label: str | None                  # "output 0", "gradient of w"; None: the rank fails (``failure``)
    rank: int
    index: tuple[int, ...]
    leaves: Mapping[str, Any]          # every leaf of the program (NumPy arrays), pinned draws included
    model_reference: Any = None        # the model's single-device value at ``index``
    model_rank: Any = None             # the model's rank value there
    culprit: Op | None = None          # where the model's values first differ
    how: str = ""                      # "found by concrete evaluation", "found by Z3 ..."
    failure: str | None = None         # the rank failure the model predicts
    # a race in the recorded ops' timing (a read before wait(), a handle never waited on): torch runs the ranks
    # with each async collective completing at its wait() and compares every output and gradient
    late_async: bool = False


@dataclass(frozen=True)
class Confirmation:
    outcome: str                       # REPRODUCED | AGREES | NOT_RUN
    detail: str                        # one sentence for the user
    world: int = 0                     # the number of real ranks run
    label: str | None = None           # the value torch shows differing
    rank: int | None = None
    index: tuple[int, ...] = ()
    reference_value: Any = None        # torch on one device, at ``index``
    rank_value: Any = None             # torch on ``rank``, at ``index``
    per_rank: dict[str, Any] = field(default_factory=dict)   # "rank r" -> {label: torch's whole value}
    seconds: float = 0.0


Confirm = Callable[[Any, Finding], Confirmation]   # (the TracedProgram, the finding) -> what torch says
