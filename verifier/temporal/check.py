"""Run the temporal checks on per-rank timelines and say what was proven.

One pipeline for IR programs and pipeline schedules alike: timelines -> async hygiene ->
matching of messages and collectives -> collective order -> deadlock simulation.  A
property is claimed as proven only when its check found nothing and nothing it relies
on was left unmodelled (an unsupported op, or an unmatched event the simulation skipped).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Program
from ..report import Diagnostic
from .async_check import check_async
from .collective_order import check_collective_order
from .deadlock import Outcome, check_deadlock
from .events import COLLECTIVE, Event, project
from .findings import ASYNC, DEADLOCK, ORDER, P2P, UNSUPPORTED, Finding, plural, to_diagnostics
from .matching import match


@dataclass
class TemporalResult:
    """Diagnostics, properties proven (one sentence each) and the size of what was checked."""

    diagnostics: list[Diagnostic]
    proven: list[str] = field(default_factory=list)
    ranks: int = 0
    events: int = 0
    outcome: Outcome | None = None

    @property
    def ok(self) -> bool:
        return not self.diagnostics


def analyse_timelines(timelines: tuple[tuple[Event, ...], ...], findings: list[Finding] | tuple[Finding, ...] = (),
                      subject: str = "temporal") -> TemporalResult:
    """Every temporal check on ready-made timelines (rank ``i`` runs ``timelines[i]``)."""
    findings = list(findings) + check_async(timelines)
    matching = match(timelines)
    findings += matching.findings
    findings += check_collective_order(timelines, matching)
    outcome, deadlocks = check_deadlock(timelines, matching)
    findings += deadlocks
    checks = {finding.check for finding in findings}
    world, events = len(timelines), sum(len(timeline) for timeline in timelines)
    asyncs = sum(event.is_async for timeline in timelines for event in timeline)
    groups = {event.group for timeline in timelines for event in timeline if event.kind == COLLECTIVE}
    proven: list[str] = []
    if UNSUPPORTED not in checks:
        claims = [
            (ASYNC not in checks and asyncs > 0,
             f"{subject}: {plural(asyncs, 'async op')} waited on, no buffer touched while in flight"),
            (P2P not in checks and matching.messages > 0,
             f"{subject}: {plural(matching.messages, 'point-to-point message')} matched send-to-recv"),
            (ORDER not in checks and matching.collectives > 0,
             f"{subject}: collective order agrees within every process group ({plural(len(groups), 'group')}, "
             f"{plural(matching.collectives, 'matched collective')})"),
            (not checks & {P2P, ORDER, DEADLOCK},
             f"{subject}: deadlock-free under rendezvous semantics "
             f"({plural(world, 'rank')}, {plural(events, 'event')})"),
        ]
        proven = [claim for holds, claim in claims if holds]
    return TemporalResult(to_diagnostics(findings, world), proven, world, events, outcome)


def analyse_program(program: Program) -> TemporalResult:
    """Project ``program`` onto every rank of its mesh and run all temporal checks."""
    projection = project(program)
    return analyse_timelines(projection.timelines, projection.findings)


def check_temporal(program: Program, proven: list[str] | None = None) -> list[Diagnostic]:
    """Temporal diagnostics of ``program``; properties proven are appended to ``proven``.

    Typical use: ``report.diagnostics += check_temporal(program, report.proven)``.
    """
    result = analyse_program(program)
    if proven is not None:
        proven.extend(result.proven)
    return result.diagnostics
