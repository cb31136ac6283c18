"""Time in a traced run: each rank's recorded op list as a timeline of events.

A traced program already is one straight-line op list per rank, with collectives naming
their group by global ranks and point-to-point ops naming their peer and tag, so nothing
needs unrolling: this module turns the lists into ``temporal.events.Event`` timelines and
matches communication across ranks:

* collectives by their position in their group's sequence (the k-th collective a rank
  issues on a group meets the k-th of every other member), as gloo and NCCL do;
* messages by ``(source, destination, tag)`` in order: a receive waits for the next send
  with its own tag, so receives posted in the other tag order than the sends hang (gloo).

The async, collective-order and deadlock checks of ``verifier/temporal`` then run unchanged.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from .ir import Mesh, Op
from .report import Diagnostic
from .temporal.async_check import check_async
from .temporal.collective_order import check_collective_order
from .temporal.deadlock import check_deadlock
from .temporal.events import ATTR_DEFAULTS, COLLECTIVE, COLLECTIVES, COMPUTE, P2P_OPS, RECV, SEND, WAIT, Event
from .temporal.findings import ASYNC, DEADLOCK, ORDER, P2P, Finding, plural, to_diagnostics
from .temporal.matching import Matching, Rendezvous, _match_collectives
from .temporal.ranks import Group, RankSpace

COLLECTIVE_KINDS = frozenset(COLLECTIVES)
MESSAGE_KINDS = frozenset(P2P_OPS)


class MalformedRecording(Exception):
    def __init__(self, op: Op | None, message: str):
        self.op = op
        super().__init__(message)


@dataclass(frozen=True)
class TemporalOutcome:
    diagnostics: list[Diagnostic]
    proven: list[str]
    hangs: bool  # some rank never finishes: values cannot be compared


def group_name(members: tuple[int, ...], mesh: dict[str, int], world: int) -> tuple[str, ...]:
    """The mesh dims a group spans (``("tp",)``), or ``("group",)`` when it is no mesh group."""
    if mesh and world == _product(mesh.values()):
        space = RankSpace(Mesh(tuple(mesh.items())))
        names = list(mesh)
        for count in range(len(names) + 1):
            for dims in itertools.combinations(names, count):
                if space.group(members[0], dims).members == tuple(sorted(members)):
                    return dims if dims else ("self",)
    return ("world",) if tuple(sorted(members)) == tuple(range(world)) else ("group",)


def _product(values) -> int:
    total = 1
    for value in values:
        total *= int(value)
    return total


class _Timeline:
    """Builds one rank's events; in-place collectives alias their result to their operand."""

    def __init__(self, rank: int, mesh: dict[str, int], world: int):
        self.rank, self.mesh, self.world = rank, mesh, world
        self.alias: dict[str, str] = {}
        self.handle_results: dict[str, tuple[str, ...]] = {}
        self.events: list[Event] = []

    def root(self, name: str) -> str:
        return self.alias.get(name, name)

    def add(self, index: int, op: Op) -> None:
        if op.kind in COLLECTIVE_KINDS:
            self._collective(index, op)
        elif op.kind in MESSAGE_KINDS:
            self._message(index, op)
        elif op.kind == "wait":
            self._wait(index, op)
        else:
            self.events.append(Event(COMPUTE, op.span.line, op.kind, reads=tuple(self.root(a) for a in op.args),
                                     writes=op.results, origin=index, names=op.args))

    def _collective(self, index: int, op: Op) -> None:
        members = op.attr("group")
        if not members or self.rank not in members:
            raise MalformedRecording(op, f"{op.kind} on rank {self.rank} has group={members!r}, which does not "
                                         f"contain the rank")
        members = tuple(int(m) for m in members)
        kind = COLLECTIVES[op.kind]
        operands = tuple(self.root(a) for a in op.args)
        if kind.in_place and operands:
            writes = operands[:1]
            self.alias.update({result: operands[0] for result in op.results})
        else:
            writes = op.results
        agreed = tuple((name, op.attr(name, ATTR_DEFAULTS.get(name))) for name in kind.agree_on)
        dims = group_name(members, self.mesh, self.world)
        handle = op.attr("handle")
        if handle is not None:
            self.handle_results[str(handle)] = tuple(self.root(r) for r in op.results)
        what = f"{op.kind}({', '.join(op.args)}" + "".join(f", {k}={v}" for k, v in agreed) + \
            f") over ranks {list(members)}"
        self.events.append(Event(COLLECTIVE, op.span.line, what, None if handle is None else str(handle),
                                 group=Group(dims, tuple(sorted(members))),
                                 signature=(op.kind, members) + agreed, reads=operands, writes=writes,
                                 operands=operands, origin=None, names=op.args))

    def _message(self, index: int, op: Op) -> None:
        kind, is_async = P2P_OPS[op.kind]
        peer = op.attr("peer")
        if not isinstance(peer, int) or not 0 <= peer < self.world or peer == self.rank:
            raise MalformedRecording(op, f"{op.kind} on rank {self.rank} has peer={peer!r}")
        handle = op.attr("handle")
        if handle is not None:
            self.handle_results[str(handle)] = op.results
        tag = int(op.attr("tag", 0) or 0)
        direction = "to" if kind == SEND else "from"
        self.events.append(Event(kind, op.span.line, f"{op.kind} {direction} rank {peer} (tag {tag})",
                                 None if handle is None else str(handle), peer=peer,
                                 signature=(tag,), reads=tuple(self.root(a) for a in op.args) if kind == SEND else (),
                                 writes=op.results if kind == RECV else (), origin=index, names=op.args,
                                 text=f"{op.kind}(peer={peer}, tag={tag})"))

    def _wait(self, index: int, op: Op) -> None:
        handle = op.attr("handle")
        if handle is None:
            raise MalformedRecording(op, "wait without handle=")
        results = self.handle_results.get(str(handle), ())
        self.alias.update({result: results[0] for result in op.results if results})
        self.events.append(Event(WAIT, op.span.line, f"wait(handle={handle})", str(handle), origin=index))


def timelines(ranks: tuple[tuple[Op, ...], ...], mesh: dict[str, int]) -> tuple[tuple[Event, ...], ...]:
    out = []
    for rank, ops in enumerate(ranks):
        timeline = _Timeline(rank, mesh, len(ranks))
        for index, op in enumerate(ops):
            timeline.add(index, op)
        out.append(tuple(timeline.events))
    return tuple(out)


def _match_messages(lines: tuple[tuple[Event, ...], ...], matching: Matching) -> None:
    """The k-th send from A to B with tag t meets the k-th receive on B from A with tag t."""
    sends: dict[tuple[int, int, int], list[int]] = {}
    recvs: dict[tuple[int, int, int], list[int]] = {}
    for rank, timeline in enumerate(lines):
        for index, event in enumerate(timeline):
            if event.kind == SEND:
                sends.setdefault((rank, event.peer, event.signature[0]), []).append(index)
            elif event.kind == RECV:
                recvs.setdefault((event.peer, rank, event.signature[0]), []).append(index)
    for channel in sorted(set(sends) | set(recvs)):
        src, dst, tag = channel
        out, into = sends.get(channel, []), recvs.get(channel, [])
        for send_index, recv_index in zip(out, into):
            matching.of_event[src][send_index] = matching.of_event[dst][recv_index] = len(matching.rendezvous)
            matching.rendezvous.append(Rendezvous(((src, send_index), (dst, recv_index))))
            matching.messages += 1
        for send_index in out[len(into):]:
            send = lines[src][send_index]
            matching.findings.append(Finding(P2P, send.line, f"{send.what} at line {send.line} is never received: "
                                                             f"rank {dst} posts {len(into)} receive(s) from rank {src} "
                                                             f"with tag {tag}", src))
        for recv_index in into[len(out):]:
            recv = lines[dst][recv_index]
            matching.findings.append(Finding(DEADLOCK, recv.line, f"{recv.what} at line {recv.line} blocks forever: "
                                                                  f"rank {src} sends {len(out)} message(s) with tag "
                                                                  f"{tag} to rank {dst}", dst))


def analyse(ranks: tuple[tuple[Op, ...], ...], mesh: dict[str, int]) -> TemporalOutcome:
    """Async hygiene, collective order, message matching and deadlock freedom of the ranks."""
    lines = timelines(ranks, mesh)
    findings = check_async(lines)
    matching = Matching([], [[-1] * len(timeline) for timeline in lines], [])
    _match_messages(lines, matching)
    _match_collectives(lines, matching)
    findings += matching.findings
    findings += check_collective_order(lines, matching)
    outcome, deadlocks = check_deadlock(lines, matching)
    findings += deadlocks
    checks = {finding.check for finding in findings}
    world, events = len(lines), sum(len(timeline) for timeline in lines)
    asyncs = sum(event.is_async for timeline in lines for event in timeline)
    groups = {event.group for timeline in lines for event in timeline if event.kind == COLLECTIVE}
    claims = [
        (ASYNC not in checks and asyncs > 0,
         f"temporal: {plural(asyncs, 'async op')} waited on, no buffer touched while in flight"),
        (not checks & {P2P, DEADLOCK} and matching.messages > 0,
         f"temporal: {plural(matching.messages, 'point-to-point message')} matched by (source, destination, tag)"),
        (ORDER not in checks and matching.collectives > 0,
         f"temporal: collective order agrees within every process group ({plural(len(groups), 'group')}, "
         f"{plural(matching.collectives, 'matched collective')})"),
        (not checks & {P2P, ORDER, DEADLOCK},
         f"temporal: deadlock-free under rendezvous semantics ({plural(world, 'rank')}, {plural(events, 'event')})"),
    ]
    hangs = bool(checks & {ORDER, DEADLOCK, P2P}) or not outcome.deadlock_free
    return TemporalOutcome(to_diagnostics(findings, world), [claim for holds, claim in claims if holds], hangs)
