"""Async hygiene on each rank: handles are waited, and in-flight buffers are left alone.

Between ``x = all_reduce(h, handle=w)`` and ``wait(handle=w)`` the communication library
owns the op's buffers: reading what it writes sees a half-reduced tensor, and writing what
it reads or writes corrupts the message.  Nothing on the happens-before path orders the
two accesses except the wait, so any such access is a race whatever the timing.

The rules, per rank and in program order (buffers are roots, see ``events.py``):

* an access to a buffer an in-flight op writes, or a write to one it reads, is a race;
* two in-flight async ops writing one buffer race with each other;
* every handle is waited on; a wait names a handle issued earlier on the same rank;
* a handle is not reused while its previous op is still in flight.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Span
from .events import WAIT, Event
from .findings import ASYNC, Finding


def _at(event: Event) -> str:
    if event.line is None and event.within is None:
        return event.generic
    return f"{event.generic} at {Span(event.line, None, event.within).where()}"


def _found(event: Event, message: str, rank: int | None = None) -> Finding:
    """A finding at ``event``'s place: its line in the user's package (with the file) when it ran there."""
    line, file = Span(event.line, None, event.within).place()
    return Finding(ASYNC, line, message, rank, file=file)


def _own_lines(pending: Event, reader: Event | None) -> tuple[int, int | None] | None:
    """Where a missing wait of ``pending`` is placed, as lines of the checked file: the async op's line and
    the early reader's (None: never waited on).  Nothing when either ran in another file (a package of the
    user's: a repair line is always the checked file's)."""
    if pending.line is None or pending.within is not None:
        return None
    if reader is not None and (reader.line is None or reader.within is not None):
        return None
    return pending.line, None if reader is None else reader.line


def _conflicts(event: Event, writers: dict[str, Event], readers: dict[str, list[Event]]) -> list[Finding]:
    """Races between ``event`` and the in-flight ops, found through the buffers it touches.

    One finding per buffer, the most specific first: two async writers, then an early
    read, then an overwrite of a buffer an in-flight op still reads or writes.
    """
    findings, reported = [], set()
    for root in event.writes if event.is_async else ():
        pending = writers.get(root)
        if pending is not None:
            reported.add(root)
            findings.append(_found(event, f"two in-flight async ops write buffer `{root}`: {_at(event)} starts "
                                          f"before wait(handle={pending.handle}) of {_at(pending)}"))
    for root in event.reads:
        pending = writers.get(root)
        if pending is not None and root not in reported:
            reported.add(root)
            findings.append(replace(_found(event, f"{_at(event)} reads `{event.name_of(root)}` before "
                                                  f"wait(handle={pending.handle}): {_at(pending)} is still writing it"),
                                    missing_wait=_own_lines(pending, event)))
    for root in event.writes:
        if root in reported:
            continue
        users = ([writers[root]] if root in writers else []) + readers.get(root, [])
        findings.extend(_found(event, f"{_at(event)} overwrites `{root}` before wait(handle={pending.handle}): "
                                      f"{_at(pending)} is still using it") for pending in users)
    return findings


def check_rank(rank: int, timeline: tuple[Event, ...]) -> list[Finding]:
    """All async findings of one rank's timeline, in one pass over its events."""
    findings: list[Finding] = []
    in_flight: dict[str, Event] = {}
    writers: dict[str, Event] = {}
    readers: dict[str, list[Event]] = {}
    waited: set[str] = set()

    def retire(pending: Event) -> None:
        for root in pending.writes:
            if writers.get(root) is pending:
                del writers[root]
        for root in pending.reads:
            if pending in readers.get(root, ()):
                readers[root].remove(pending)

    for event in timeline:
        if event.kind == WAIT:
            pending = in_flight.pop(event.handle, None)
            if pending is not None:
                retire(pending)
            elif event.handle not in waited:
                findings.append(_found(event, f"{_at(event)} names a handle that no earlier async op on this "
                                              f"rank created", rank))
            waited.add(event.handle)
            continue
        if event.reads or event.writes:
            for conflict in _conflicts(event, writers, readers):
                findings.append(replace(conflict, rank=rank))
        if event.is_async:
            previous = in_flight.get(event.handle)
            if previous is not None:
                findings.append(_found(event, f"{_at(event)} reuses handle {event.handle} while {_at(previous)} is "
                                              f"still in flight, so that op is never waited on", rank))
            in_flight[event.handle] = event
            waited.discard(event.handle)
            for root in event.writes:
                writers[root] = event
            for root in event.reads:
                if root not in event.writes:
                    readers.setdefault(root, []).append(event)
    for handle, pending in in_flight.items():
        findings.append(replace(_found(pending, f"handle {handle} of {_at(pending)} is never waited on", rank),
                                missing_wait=_own_lines(pending, None)))
    return findings


def check_async(timelines: tuple[tuple[Event, ...], ...]) -> list[Finding]:
    return [finding for rank, timeline in enumerate(timelines) for finding in check_rank(rank, timeline)]
