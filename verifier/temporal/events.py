"""Project an SPMD IR program onto each rank: the per-rank sequence of events in time.

Every rank runs the same op list, but ``when=`` predicates switch ops off on some ranks
and ``peer=`` expressions name different partners, so the temporal checks need the
concrete sequence each rank executes.  This module unrolls control flow on rank and
resolves peers; it knows nothing about what the checks do with the result.

An op whose ``when`` is false on a rank emits nothing there; its results alias its first
argument (docs/ir.md).  Buffers are tracked by *root* name: an in-place collective
(``all_reduce``, ``broadcast``, ``reduce``) writes the buffer of its input, as torch's
``dist.all_reduce(t)`` does, so its SSA result and its input share one root.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..ir import Op, Program
from .expr import ExprError, evaluate
from .findings import ASYNC, P2P, UNSUPPORTED, Finding
from .ranks import Group, RankSpace

COMPUTE, COLLECTIVE, SEND, RECV, WAIT = "compute", "collective", "send", "recv", "wait"


@dataclass(frozen=True)
class Event:
    """One thing a rank does, in its program order.

    ``kind`` is one of compute/collective/send/recv/wait; ``what`` describes it for this
    rank (``recv from rank 1``), ``text`` for every rank (``recv(peer=1-tp)``).
    ``handle`` makes a collective or message asynchronous (or names what a wait waits for).
    ``signature`` is what members of a collective (or the two ends of a message) must agree
    on, without shapes: ``("all_reduce", ("tp",), ("op", "sum"))``.  ``reads``/``writes``
    are buffer roots, ``names`` the SSA names read (parallel to ``reads``), ``operands``
    the roots of a collective's tensor arguments, ``origin`` the index of the IR op.
    """

    kind: str
    line: int | None
    what: str
    handle: str | None = None
    peer: int | None = None
    group: Group | None = None
    signature: tuple = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    operands: tuple[str, ...] = ()
    origin: int | None = None
    names: tuple[str, ...] = ()
    text: str = ""
    tag: int = 0  # point-to-point tag: a message meets only a receive from its peer with the same tag
    # (file, line) in the user's own package when the op ran there (traced runs; ``line`` is then the
    # checked file's line that called into it)
    within: tuple[str, int] | None = None

    @property
    def generic(self) -> str:
        """A rank-independent description (``isend(peer=tp+1)``), so findings merge across ranks."""
        return self.text or self.what

    def name_of(self, root: str) -> str:
        """The SSA name this event used for buffer ``root`` (``y`` rather than its root ``h``)."""
        for name, read in zip(self.names, self.reads):
            if read == root:
                return name
        return root

    @property
    def is_async(self) -> bool:
        return self.handle is not None and self.kind != WAIT


@dataclass(frozen=True)
class CollectiveKind:
    """How a collective touches memory and which attributes its members must agree on."""

    in_place: bool
    agree_on: tuple[str, ...] = ()


COLLECTIVES: dict[str, CollectiveKind] = {
    "all_reduce": CollectiveKind(True, ("op",)),
    "broadcast": CollectiveKind(True, ("src",)),
    "reduce": CollectiveKind(True, ("dst", "op")),
    "all_gather": CollectiveKind(False, ("dim",)),
    "reduce_scatter": CollectiveKind(False, ("dim", "op")),
    "all_to_all": CollectiveKind(False, ("split_dim", "concat_dim")),
    "scatter": CollectiveKind(False, ("src", "dim")),
    "gather": CollectiveKind(False, ("dst", "dim")),
    "vocab_parallel_embedding": CollectiveKind(False),
    "vocab_parallel_cross_entropy": CollectiveKind(False, ("reduction",)),
}
ATTR_DEFAULTS: dict[str, Any] = {"op": "sum", "src": 0, "dst": 0, "reduction": "mean"}
P2P_OPS: dict[str, tuple[str, bool]] = {  # op -> (event kind, asynchronous)
    "send": (SEND, False), "recv": (RECV, False), "isend": (SEND, True), "irecv": (RECV, True)}


@dataclass(frozen=True)
class Projection:
    """Each rank's events, plus problems found while unrolling (bad peers, bad predicates)."""

    space: RankSpace
    timelines: tuple[tuple[Event, ...], ...]
    findings: tuple[Finding, ...] = ()


def mesh_dims_of(op: Op) -> tuple[str, ...]:
    value = op.attr("mesh_dim")
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (str(value),)


@dataclass
class _RankState:
    """What unrolling one rank needs to remember: buffer aliases and async results."""

    rank: int
    env: dict[str, int]
    alias: dict[str, str] = field(default_factory=dict)
    handle_results: dict[str, tuple[str, ...]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def root(self, name: str) -> str:
        return self.alias.get(name, name)

    def roots(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(self.root(name) for name in names)

    def problem(self, check: str, op: Op, message: str) -> None:
        self.findings.append(Finding(check, op.span.line, message, self.rank))


def _compute(state: _RankState, space: RankSpace, index: int, op: Op) -> None:
    state.events.append(Event(COMPUTE, op.span.line, f"{op.kind}", reads=state.roots(op.args),
                              writes=op.results, origin=index, names=op.args))


def _collective(state: _RankState, space: RankSpace, index: int, op: Op) -> None:
    kind = COLLECTIVES[op.kind]
    dims = mesh_dims_of(op)
    unknown = [name for name in dims if name not in space.mesh.names]
    if not dims or unknown:
        state.problem(UNSUPPORTED, op, f"{op.kind} needs mesh_dim= naming a mesh dim ({', '.join(space.mesh.names)})")
        return
    operands = state.roots(op.args)
    if kind.in_place and operands:
        writes = operands[:1]
        state.alias.update({result: operands[0] for result in op.results})
    else:
        writes = op.results
    signature = (op.kind, dims) + tuple((name, op.attr(name, ATTR_DEFAULTS.get(name))) for name in kind.agree_on)
    handle = op.attr("handle")
    if handle is not None:
        state.handle_results[str(handle)] = tuple(state.root(result) for result in op.results)
    attrs = "".join(f", {name}={value}" for name, value in signature[2:])
    what = f"{op.kind}({', '.join(op.args)}{attrs}) over {'x'.join(dims)}"
    state.events.append(Event(COLLECTIVE, op.span.line, what, None if handle is None else str(handle),
                              group=space.group(state.rank, dims), signature=signature,
                              reads=operands, writes=writes, operands=operands, origin=index, names=op.args))


def _point_to_point(state: _RankState, space: RankSpace, index: int, op: Op) -> None:
    kind, is_async = P2P_OPS[op.kind]
    if op.attr("peer") is None:
        state.problem(UNSUPPORTED, op, f"{op.kind} needs peer=")
        return
    dims = mesh_dims_of(op)
    try:
        coordinate = int(evaluate(op.attr("peer"), state.env))
    except ExprError as exc:
        state.problem(UNSUPPORTED, op, f"cannot evaluate peer={op.attr('peer')} of {op.kind}: {exc}")
        return
    peer = space.peer(state.rank, coordinate, dims)
    if peer is None:
        where = f"{dims[0]} (size {space.mesh.size(dims[0])})" if len(dims) == 1 else f"the world (size {space.world})"
        state.problem(P2P, op, f"{op.kind} peer={op.attr('peer')} evaluates to {coordinate}, outside {where}")
        return
    if peer == state.rank:
        state.problem(P2P, op, f"{op.kind} peer={op.attr('peer')} names the rank itself")
        return
    try:
        tag = int(evaluate(op.attr("tag", 0), state.env))
    except ExprError as exc:
        state.problem(UNSUPPORTED, op, f"cannot evaluate tag={op.attr('tag')} of {op.kind}: {exc}")
        return
    handle = op.attr("handle")
    if is_async and handle is None:
        state.problem(ASYNC, op, f"{op.kind} has no handle=, so its completion is never waited on")
    if handle is not None:
        state.handle_results[str(handle)] = op.results
    direction = "to" if kind == SEND else "from"
    what = f"{op.kind} {direction} rank {peer}" + (f" with tag {tag}" if tag else "")
    reads = state.roots(op.args) if kind == SEND else ()
    writes = op.results if kind == RECV else ()
    state.events.append(Event(kind, op.span.line, what, None if handle is None else str(handle), peer=peer,
                              reads=reads, writes=writes, origin=index, names=op.args,
                              text=f"{op.kind}(peer={op.attr('peer')}" + (f", tag={op.attr('tag')}" if tag else "") + ")",
                              tag=tag))


def _wait(state: _RankState, space: RankSpace, index: int, op: Op) -> None:
    handle = op.attr("handle")
    if handle is None:
        state.problem(UNSUPPORTED, op, "wait needs handle=")
        return
    results = state.handle_results.get(str(handle), ())
    state.alias.update({result: results[0] for result in op.results if results})
    state.events.append(Event(WAIT, op.span.line, f"wait(handle={handle})", str(handle), origin=index))


_PROJECTORS: dict[str, Callable[[_RankState, RankSpace, int, Op], None]] = {
    **{name: _collective for name in COLLECTIVES},
    **{name: _point_to_point for name in P2P_OPS},
    "wait": _wait,
}


def _runs_here(state: _RankState, op: Op) -> bool:
    when = op.attr("when")
    if when is None:
        return True
    try:
        return bool(evaluate(when, state.env))
    except ExprError as exc:
        state.problem(UNSUPPORTED, op, f"cannot evaluate when={when!r}: {exc}")
        return False


def project(program: Program) -> Projection:
    """The events each rank of ``program.mesh`` executes, in program order."""
    space = RankSpace(program.mesh)
    timelines, findings = [], []
    for rank in range(space.world):
        state = _RankState(rank, space.env(rank))
        for index, op in enumerate(program.ops):
            if not _runs_here(state, op):
                if op.args:
                    state.alias.update({result: state.root(op.args[0]) for result in op.results})
                continue
            _PROJECTORS.get(op.kind, _compute)(state, space, index, op)
        timelines.append(tuple(state.events))
        findings.extend(state.findings)
    return Projection(space, tuple(timelines), tuple(findings))
