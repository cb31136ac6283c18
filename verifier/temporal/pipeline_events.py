"""Lower a pipeline schedule to the per-rank events the shared temporal checks consume.

Compute steps become compute events; messages become send/recv events whose signature is
the payload they carry, ``("act", microbatch, producing virtual stage)`` or
``("grad", microbatch, producing virtual stage)``, so the FIFO matching of ``matching.py``
also proves that each message arrives where the receiver expects it.  Async actions get
a handle per action; ``wait`` and the end of a ``[ ... ]`` batch wait on them.
"""
from __future__ import annotations

from .events import COMPUTE, RECV, SEND, WAIT, Event
from .schedule import BATCH, WAIT_ALL, Action, Schedule


def payload(schedule: Schedule, rank: int, action: Action) -> tuple[str, int, int]:
    """Which tensor a message moves, named by the virtual stage that produced it."""
    comm = action.comm
    here = schedule.virtual(rank, action.chunk)
    if comm.direction == "send":
        return (comm.payload, action.microbatch, here)
    return (comm.payload, action.microbatch, here - 1 if comm.payload == "act" else here + 1)


def _message(schedule: Schedule, rank: int, action: Action, what: str, handle: str | None) -> Event:
    kind = SEND if action.comm.direction == "send" else RECV
    return Event(kind, action.line, what, handle, peer=action.peer, signature=payload(schedule, rank, action))


def rank_events(schedule: Schedule, rank: int) -> tuple[Event, ...]:
    events: list[Event] = []
    outstanding: list[str] = []
    for position, action in enumerate(schedule.ranks[rank]):
        what = f"{action} (action {position})"
        if action.kind == WAIT_ALL:
            events.extend(Event(WAIT, action.line, f"wait for {handle}", handle) for handle in outstanding)
            outstanding = []
        elif action.kind == BATCH:
            handles = [f"{member} (action {position})" for member in action.members]
            events.extend(_message(schedule, rank, member, handle, handle)
                          for member, handle in zip(action.members, handles))
            events.extend(Event(WAIT, action.line, f"wait for {what}", handle) for handle in handles)
        elif action.comm is not None:
            handle = None if action.comm.blocking else what
            events.append(_message(schedule, rank, action, what, handle))
            if handle is not None:
                outstanding.append(handle)
        else:
            events.append(Event(COMPUTE, action.line, what))
    return tuple(events)


def schedule_timelines(schedule: Schedule) -> tuple[tuple[Event, ...], ...]:
    return tuple(rank_events(schedule, rank) for rank in range(schedule.stages))
