"""Deadlock freedom: run every rank's timeline against the others until all finish or hang.

Semantics (the conservative choice, so a "deadlock-free" verdict holds for every backend):

* **rendezvous**: a blocking ``send`` returns only once the matching ``recv`` is posted,
  and a blocking ``recv`` once the matching send is posted.  Eager (buffered) sends can
  hide a cycle for small messages on some backends; they never create one.
* a blocking collective returns once every member of its group has posted it;
* ``isend``/``irecv``/async collectives post and continue; ``wait(handle)`` blocks until
  their rendezvous is complete.

Each event is visited once and each rendezvous wakes its waiters once, so the simulation
is linear in events.  Ranks left blocked form a wait-for graph in which every blocked
rank waits for a rank that has not posted its part yet; following those edges always
closes a cycle, which is what the report names: the ranks and the line each is stuck on.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .events import RECV, SEND, WAIT, Event
from .findings import DEADLOCK, Finding
from .matching import NO_RENDEZVOUS, Matching

RENDEZVOUS_HINT = ("assumes rendezvous semantics: a blocking send returns only when the matching recv is posted; "
                   "post both sides with isend/irecv (batch_isend_irecv) or order them send-first on one side")


@dataclass(frozen=True)
class Outcome:
    """Where each rank stopped: ``stuck[rank]`` is the rendezvous it blocks on (or absent)."""

    positions: tuple[int, ...]
    stuck: dict[int, int]

    @property
    def deadlock_free(self) -> bool:
        return not self.stuck


def simulate(timelines: tuple[tuple[Event, ...], ...], matching: Matching) -> Outcome:
    """Run all ranks to completion or to a global hang."""
    sizes = [len(rendezvous.members) for rendezvous in matching.rendezvous]
    posted = [0] * len(sizes)
    complete = [False] * len(sizes)
    waiters: list[list[int]] = [[] for _ in sizes]
    positions = [0] * len(timelines)
    blocked_on: dict[int, int] = {}
    handles: list[dict[str, int]] = [{} for _ in timelines]
    runnable = deque(range(len(timelines)))
    while runnable:
        rank = runnable.popleft()
        timeline, rendezvous_of, index = timelines[rank], matching.of_event[rank], positions[rank]
        while index < len(timeline):
            event = timeline[index]
            if event.kind == WAIT:
                target = handles[rank].pop(event.handle, NO_RENDEZVOUS)
                if target != NO_RENDEZVOUS and not complete[target]:
                    waiters[target].append(rank)
                    blocked_on[rank] = target
                    break
                index += 1
                continue
            target = rendezvous_of[index]
            if target == NO_RENDEZVOUS:
                index += 1
                continue
            posted[target] += 1
            if posted[target] == sizes[target]:
                complete[target] = True
                for waiter in waiters[target]:
                    positions[waiter] += 1
                    del blocked_on[waiter]
                    runnable.append(waiter)
                waiters[target] = []
            if event.is_async:
                handles[rank][event.handle] = target
            elif not complete[target]:
                waiters[target].append(rank)
                blocked_on[rank] = target
                break
            index += 1
        positions[rank] = index
    return Outcome(tuple(positions), blocked_on)


def _has_posted(timelines, positions, rank: int, index: int) -> bool:
    at = positions[rank]
    return at > index or (at == index and timelines[rank][index].kind != WAIT)


def _waits_for(timelines, matching: Matching, outcome: Outcome, rank: int) -> int:
    """The lowest rank whose missing post keeps ``rank`` blocked."""
    members = matching.rendezvous[outcome.stuck[rank]].members
    return min(other for other, index in members if not _has_posted(timelines, outcome.positions, other, index))


def deadlock_cycles(timelines: tuple[tuple[Event, ...], ...], matching: Matching,
                    outcome: Outcome) -> list[list[int]]:
    """Every cycle of the wait-for graph among stuck ranks, each starting at its lowest rank."""
    cycles, done = [], set()
    for start in sorted(outcome.stuck):
        path, on_path, rank = [], {}, start
        while rank not in done and rank not in on_path:
            on_path[rank] = len(path)
            path.append(rank)
            rank = _waits_for(timelines, matching, outcome, rank)
        if rank in on_path:
            cycle = path[on_path[rank]:]
            low = cycle.index(min(cycle))
            cycles.append(cycle[low:] + cycle[:low])
        done.update(path)
    return cycles


def _where(event: Event) -> str:
    return f"{event.what} at line {event.line}" if event.line is not None else event.what


def _blocked_op(timeline: tuple[Event, ...], position: int) -> Event:
    """The event a rank is stuck on: for a ``wait``, the asynchronous op it waits for (a blocking send or
    receive is recorded as one and its wait)."""
    event = timeline[position]
    if event.kind == WAIT:
        for earlier in reversed(timeline[:position]):
            if earlier.is_async and earlier.handle == event.handle:
                return earlier
    return event


def _repair_line(timelines: tuple[tuple[Event, ...], ...], outcome: Outcome, cycle: list[int]) -> int | None:
    """The checked file's line where a deadlock's fix goes, when the blocked ops determine it: a receive posted
    in another tag order than its partner's sends (the partner is blocked sending a tag this rank receives
    later), that receive; every rank of the cycle blocked receiving (none sends first), the first receive.
    None otherwise (or when the op ran in the user's package, not in the checked file)."""
    blocked = {rank: _blocked_op(timelines[rank], outcome.positions[rank]) for rank in cycle}
    for index, rank in enumerate(cycle):
        receive, partner = blocked[rank], cycle[(index + 1) % len(cycle)]
        send = blocked[partner]
        if receive.kind != RECV or send.kind != SEND or receive.peer != partner or send.peer != rank \
                or receive.tag == send.tag:
            continue
        later = timelines[rank][outcome.positions[rank] + 1:]
        if any(e.kind == RECV and e.peer == partner and e.tag == send.tag for e in later):
            return receive.line if receive.within is None else None
    first = blocked[cycle[0]]
    if all(op.kind == RECV for op in blocked.values()) and first.within is None:
        return first.line
    return None


def check_deadlock(timelines: tuple[tuple[Event, ...], ...], matching: Matching) -> tuple[Outcome, list[Finding]]:
    """Simulate; one finding per wait-for cycle, on the line the cycle's lowest rank is stuck on (with the
    line where the fix goes when the blocked ops determine it: ``_repair_line``)."""
    outcome = simulate(timelines, matching)
    findings: list[Finding] = []
    cycles = deadlock_cycles(timelines, matching, outcome)
    others = len(outcome.stuck) - sum(len(cycle) for cycle in cycles)
    for cycle in cycles:
        stuck_at = [timelines[rank][outcome.positions[rank]] for rank in cycle]
        chain = " -> ".join(f"rank {rank}" for rank in cycle + cycle[:1])
        steps = "; ".join(f"rank {rank} is blocked in {_where(event)}" for rank, event in zip(cycle, stuck_at))
        behind = f" ({others} more rank(s) blocked behind it)" if others and not findings else ""
        findings.append(Finding(DEADLOCK, stuck_at[0].line, f"deadlock, cycle {chain}: {steps}{behind}",
                                hint=RENDEZVOUS_HINT, repair_line=_repair_line(timelines, outcome, cycle)))
    return outcome, findings
