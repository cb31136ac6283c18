"""Time in a traced run: each rank's recorded op list as a timeline of events.

A traced program already is one straight-line op list per rank, with collectives naming
their group by global ranks and point-to-point ops naming their peer and tag, so nothing
needs unrolling: this module turns the lists into ``temporal.events.Event`` timelines and
matches communication across ranks:

* collectives by their position in their group's sequence (the k-th collective a rank
  issues on a group meets the k-th of every other member), as gloo and NCCL do;
* messages by ``(source, destination, tag)`` in order: a receive waits for the next send
  with its own tag, so receives posted in the other tag order than the sends hang (gloo).

Matching and the async, collective-order and deadlock checks are those of ``verifier/temporal``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from .ir import Mesh, Op
from .report import Diagnostic
from .temporal.check import analyse_timelines
from .temporal.events import ATTR_DEFAULTS, COLLECTIVE, COLLECTIVES, COMPUTE, P2P_OPS, RECV, SEND, WAIT, Event
from .temporal.findings import DEADLOCK, ORDER, P2P
from .temporal.ranks import Group, RankSpace

COLLECTIVE_KINDS = frozenset(COLLECTIVES)
# ops that only make a view (metadata, no data read): their results are the operand's buffer,
# so a view taken of a buffer an async op is still writing is not a read; reading the view is
VIEW_KINDS = frozenset(f"aten.{kind}" for kind in (
    "view.default", "_unsafe_view.default", "alias.default", "detach.default", "t.default", "transpose.int",
    "permute.default", "slice.Tensor", "select.int", "expand.default", "unsqueeze.default", "squeeze.dim",
    "squeeze.dims", "squeeze.default", "as_strided.default", "split.Tensor", "split_with_sizes.default",
    "chunk.default", "unbind.int", "narrow.default", "view_as.default", "unflatten.int"))
MESSAGE_KINDS = frozenset(P2P_OPS)


class MalformedRecording(Exception):
    def __init__(self, op: Op | None, message: str):
        self.op = op
        super().__init__(message)


class MessageToSelf(MalformedRecording):
    """A rank sends to or receives from itself: torch.distributed refuses a blocking send (a ValueError) and
    gloo connects no rank to itself, so it is the user's bug, not a recording problem."""


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
        elif op.kind in VIEW_KINDS and op.args:
            self.alias.update({result: self.root(op.args[0]) for result in op.results})
        elif op.attr("write_back") and len(op.args) == 2:
            # the recorder carrying a write into a view back to its base: the base now is that buffer
            self.alias.update({result: self.root(op.args[1]) for result in op.results})
        else:
            self.events.append(Event(COMPUTE, op.span.line, op.kind, reads=tuple(self.root(a) for a in op.args),
                                     writes=op.results, origin=index, names=op.args, within=op.span.within))

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
                                 operands=operands, origin=None, names=op.args, within=op.span.within))

    def _message(self, index: int, op: Op) -> None:
        kind, is_async = P2P_OPS[op.kind]
        peer = op.attr("peer")
        if peer == self.rank:
            refusal = "torch.distributed refuses it (ValueError: the destination rank should not be the rank of the " \
                      "current process)" if op.kind == "send" else \
                "gloo connects no rank to itself, so the message never arrives (on real ranks gloo raises or the rank " \
                "blocks)"
            raise MessageToSelf(op, f"{op.kind} on rank {self.rank} has itself as its peer: {refusal}")
        if not isinstance(peer, int) or not 0 <= peer < self.world:
            raise MalformedRecording(op, f"{op.kind} on rank {self.rank} has peer={peer!r}")
        handle = op.attr("handle")
        if handle is not None:
            self.handle_results[str(handle)] = op.results
        tag = int(op.attr("tag", 0) or 0)
        direction = "to" if kind == SEND else "from"
        self.events.append(Event(kind, op.span.line, f"{op.kind} {direction} rank {peer} (tag {tag})",
                                 None if handle is None else str(handle), peer=peer,
                                 tag=tag, reads=tuple(self.root(a) for a in op.args) if kind == SEND else (),
                                 writes=op.results if kind == RECV else (), origin=index, names=op.args,
                                 text=f"{op.kind}(peer={peer}, tag={tag})", within=op.span.within))

    def _wait(self, index: int, op: Op) -> None:
        handle = op.attr("handle")
        if handle is None:
            raise MalformedRecording(op, "wait without handle=")
        results = self.handle_results.get(str(handle), ())
        self.alias.update({result: results[0] for result in op.results if results})
        self.events.append(Event(WAIT, op.span.line, f"wait(handle={handle})", str(handle), origin=index,
                                 within=op.span.within))


def timelines(ranks: tuple[tuple[Op, ...], ...], mesh: dict[str, int]) -> tuple[tuple[Event, ...], ...]:
    out = []
    for rank, ops in enumerate(ranks):
        timeline = _Timeline(rank, mesh, len(ranks))
        for index, op in enumerate(ops):
            timeline.add(index, op)
        out.append(tuple(timeline.events))
    return tuple(out)


def analyse(ranks: tuple[tuple[Op, ...], ...], mesh: dict[str, int]) -> TemporalOutcome:
    """Async hygiene, collective order, message matching and deadlock freedom of the ranks."""
    result = analyse_timelines(timelines(ranks, mesh))
    hangs = (result.outcome is not None and not result.outcome.deadlock_free) or \
        any(d.check in (ORDER, DEADLOCK, P2P) for d in result.diagnostics)
    return TemporalOutcome(result.diagnostics, result.proven, hangs)
