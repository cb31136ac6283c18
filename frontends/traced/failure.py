"""Why a run gave no program (no torch needed to read one)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TraceFailure:
    """Why there is no program: "unsupported", "input-error", "cannot-run" (use the static frontend),
    "violation" (the ranks' values cannot equal the single-device value: wrong shapes), "timeout", "internal"."""

    kind: str
    message: str
    line: int | None = None
    building: bool = False   # the entry or its inputs could not be built (a harness can build them)
    file: str | None = None  # the file of ``line`` when it is a module of the user's package, not the checked file
    reads_collective: bool = False   # a rank read values a simulated collective computed (real ranks can give them)
    repair_line: int | None = None   # where the repair goes in the checked file, when another line than ``line``
    rank_raised: bool = False   # a violation: a simulated rank raised where one device did not (real ranks must too)
    shape_of: str | None = None   # a violation: this output or gradient has another shape on a rank (real ranks too)
    # a violation found after the ranks' ops were recorded whole: those ops and the mesh, so their timing
    # (a deadlock, which the simulated ranks ran through) can still be checked
    rank_ops: tuple = ()
    mesh: dict | None = None
