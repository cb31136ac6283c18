"""Collective order: every member of a group issues the same collectives in the same order.

Collectives are matched by position (``matching.py``), so if rank 0 issues
``all_reduce(a)`` where rank 1 issues ``all_reduce(b)`` the two are silently combined, or,
when kinds differ, the job hangs.  A position is consistent when the members agree on the
shape-agnostic signature (kind, mesh dims, reduce op, dims, root) and, when they come from
different IR ops (branches under ``when=``), also on the buffers they communicate.
"""
from __future__ import annotations

from .events import Event
from .findings import ORDER, Finding
from .matching import Matching


def _disagree(first: Event, other: Event) -> bool:
    if first.signature != other.signature:
        return True
    return first.origin != other.origin and first.operands != other.operands


def check_collective_order(timelines: tuple[tuple[Event, ...], ...], matching: Matching) -> list[Finding]:
    """The first inconsistent position of each group, naming both ranks' lines.

    Ranks are named by their rank within the group (``tp rank 1``) so the same bug in
    every tp group of a ``dp x tp`` mesh is one diagnostic listing the ranks involved.
    """
    findings: list[Finding] = []
    reported: set = set()
    positions: dict = {}
    for rendezvous in matching.rendezvous:
        if rendezvous.group is None:
            continue
        position = positions[rendezvous.group] = positions.get(rendezvous.group, 0) + 1
        if rendezvous.group in reported:
            continue
        (rank0, index0), *others = rendezvous.members
        first = timelines[rank0][index0]
        for position_in_group, (rank, index) in enumerate(others, start=1):
            other = timelines[rank][index]
            if _disagree(first, other):
                reported.add(rendezvous.group)
                name = "x".join(rendezvous.group.dims)
                message = (f"collectives out of order within {name} groups: as its collective #{position} "
                           f"{name} rank 0 issues {first.what} at line {first.line} while {name} rank "
                           f"{position_in_group} issues {other.what} at line {other.line}")
                findings += [Finding(ORDER, first.line, message, rank0), Finding(ORDER, first.line, message, rank)]
                break
    return findings
