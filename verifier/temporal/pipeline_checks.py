"""What makes a pipeline schedule a schedule of *this* model: coverage, order, dependencies.

Per rank, in order, the schedule must respect the model's dataflow:

* every (microbatch, virtual stage) runs forward exactly once and backward exactly once,
  on the rank that owns that virtual stage, forward first;
* forward of stage ``v > 0`` needs the activation from ``v - 1`` already received, and
  backward of ``v < last`` the gradient from ``v + 1`` (an ``irecv`` counts once waited);
* an activation is sent only after its forward, a gradient only after its backward, and
  only to the neighbour that owns the next (previous) virtual stage.

Matching of messages and deadlock freedom are not here: they are the shared checks of
``matching.py`` and ``deadlock.py`` run on the lowered events.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .findings import PIPELINE, Finding
from .pipeline_events import payload
from .schedule import B, BATCH, F, WAIT_ALL, Action, Schedule


@dataclass
class _Walk:
    """One rank's progress: what it has computed and which inputs have arrived."""

    schedule: Schedule
    rank: int
    done: dict[tuple[str, int, int], int] = field(default_factory=dict)
    arrived: set[tuple[str, int, int]] = field(default_factory=set)
    pending: list[tuple[str, int, int]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def problem(self, action: Action, position: int, message: str) -> None:
        self.findings.append(Finding(PIPELINE, action.line,
                                     f"rank {self.rank}, action {position} ({action}): {message}"))

    def stage(self, action: Action) -> int:
        return self.schedule.virtual(self.rank, action.chunk)


def _in_range(walk: _Walk, action: Action, position: int) -> bool:
    schedule = walk.schedule
    if not 0 <= action.microbatch < schedule.microbatches:
        walk.problem(action, position, f"microbatch {action.microbatch} is outside 0..{schedule.microbatches - 1}")
        return False
    if not 0 <= action.chunk < schedule.chunks:
        walk.problem(action, position, f"chunk {action.chunk} is outside 0..{schedule.chunks - 1}")
        return False
    return True


def _compute(walk: _Walk, action: Action, position: int) -> None:
    if not _in_range(walk, action, position):
        return
    v, mb, last = walk.stage(action), action.microbatch, walk.schedule.virtual_stages - 1
    key = (action.kind, mb, v)
    if key in walk.done:
        walk.problem(action, position, f"runs again; it already ran as action {walk.done[key]}")
        return
    walk.done[key] = position
    if action.kind == F and v > 0 and ("act", mb, v - 1) not in walk.arrived:
        walk.problem(action, position, f"runs before the activation of microbatch {mb} from virtual stage {v - 1} "
                                       f"has been received")
    if action.kind == B:
        if (F, mb, v) not in walk.done:
            walk.problem(action, position, f"runs before the forward of microbatch {mb} on virtual stage {v}")
        if v < last and ("grad", mb, v + 1) not in walk.arrived:
            walk.problem(action, position, f"runs before the gradient of microbatch {mb} from virtual stage {v + 1} "
                                           f"has been received")


def _message(walk: _Walk, action: Action, position: int, posted_async: bool) -> None:
    if not _in_range(walk, action, position):
        return
    schedule, comm = walk.schedule, action.comm
    v, mb, last = walk.stage(action), action.microbatch, schedule.virtual_stages - 1
    forward = comm.payload == "act"
    other = v + 1 if forward == (comm.direction == "send") else v - 1
    if not 0 <= other <= last:
        walk.problem(action, position, f"virtual stage {v} has no neighbour stage {other} to "
                                       f"{'send to' if comm.direction == 'send' else 'receive from'}")
        return
    if action.peer != schedule.owner(other):
        walk.problem(action, position, f"wrong neighbour: virtual stage {other} lives on rank {schedule.owner(other)}, "
                                       f"not rank {action.peer}")
    if comm.direction == "send":
        needed = (F if forward else B, mb, v)
        if needed not in walk.done:
            walk.problem(action, position, f"sends the {'activation' if forward else 'gradient'} of microbatch {mb} "
                                           f"before {'forward' if forward else 'backward'} {mb} has run here")
        return
    received = payload(schedule, walk.rank, action)
    if posted_async:
        walk.pending.append(received)  # usable only once waited
    else:
        walk.arrived.add(received)


def _single_message(walk: _Walk, action: Action, position: int) -> None:
    _message(walk, action, position, posted_async=not action.comm.blocking)


def _batch(walk: _Walk, action: Action, position: int) -> None:
    before = list(walk.pending)
    walk.pending = []
    for member in action.members:
        _message(walk, member, position, posted_async=True)
    walk.arrived.update(walk.pending)
    walk.pending = before


def _wait(walk: _Walk, action: Action, position: int) -> None:
    walk.arrived.update(walk.pending)
    walk.pending = []


_STEPS: dict[str, Callable[[_Walk, Action, int], None]] = {F: _compute, B: _compute, BATCH: _batch, WAIT_ALL: _wait}


def _coverage(walk: _Walk) -> None:
    """Each (microbatch, chunk) of this rank runs forward and backward once."""
    schedule = walk.schedule
    for chunk in range(schedule.chunks):
        v = schedule.virtual(walk.rank, chunk)
        for kind, name in ((F, "forward"), (B, "backward")):
            missing = [mb for mb in range(schedule.microbatches) if (kind, mb, v) not in walk.done]
            if missing:
                line = schedule.ranks[walk.rank][0].line if schedule.ranks[walk.rank] else None
                walk.findings.append(Finding(
                    PIPELINE, line, f"rank {walk.rank} never runs {name} of microbatch(es) "
                                    f"{', '.join(map(str, missing))} on virtual stage {v} (chunk {chunk})"))


def check_pipeline_semantics(schedule: Schedule) -> list[Finding]:
    """Coverage, forward-before-backward, dataflow and neighbour findings for every rank."""
    findings: list[Finding] = []
    for rank, actions in enumerate(schedule.ranks):
        walk = _Walk(schedule, rank)
        for position, action in enumerate(actions):
            _STEPS.get(action.kind, _single_message)(walk, action, position)
        _coverage(walk)
        findings.extend(walk.findings)
    return findings
