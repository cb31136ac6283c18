"""Per-rank findings and their merge into the Diagnostics a user reads.

Every check runs per rank, so one bug in SPMD code shows up on many ranks at once.  A
``Finding`` is one rank's sighting; ``to_diagnostics`` folds sightings with the same check,
line and message into one Diagnostic that lists the ranks (``on ranks 0-3``), so a bug
is reported once however large the mesh.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..report import ERROR, Diagnostic

ASYNC, P2P, DEADLOCK, ORDER, PIPELINE, UNSUPPORTED = (
    "async", "p2p", "deadlock", "collective-order", "pipeline", "unsupported")


@dataclass(frozen=True)
class Finding:
    """One problem seen on one rank (or on several, when ``rank`` is None)."""

    check: str
    line: int | None
    message: str
    rank: int | None = None
    hint: str | None = None
    file: str | None = None   # the user's package file of ``line`` (not the checked file)
    # a wait missing from the checked file's own lines: (the line of the async op, the line of the first
    # op that read its buffer too early, or None when nothing did and the handle is never waited on)
    missing_wait: tuple[int, int | None] | None = None
    # the checked file's line where the fix goes, when the check determines one (a deadlock's receive
    # posted out of its partner's send order)
    repair_line: int | None = None


def plural(number: int, noun: str) -> str:
    """``plural(1, "rank")`` -> ``1 rank``; ``plural(4, "rank")`` -> ``4 ranks``."""
    suffix = "" if number == 1 else "es" if noun.endswith(("ch", "sh", "s", "x")) else "s"
    return f"{number} {noun}{suffix}"


def rank_ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``0-3, 6``: short enough for a 512-rank mesh."""
    ranks = sorted(set(ranks))
    parts: list[str] = []
    start = prev = ranks[0]
    for rank in ranks[1:] + [None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if rank is not None:
            start = prev = rank
    return ", ".join(parts)


MAX_PER_LINE = 3  # distinct messages shown per (check, line) before the rest is summarised


def to_diagnostics(findings: list[Finding], world: int) -> list[Diagnostic]:
    """One Diagnostic per distinct (check, line, message), naming the ranks it occurs on.

    A bug repeated with rank-specific wording (one unmatched send per rank of a ring) is
    cut to ``MAX_PER_LINE`` diagnostics per line, the last one counting the rest.
    """
    ranks_of: dict[tuple[str, int | None, str], list[int]] = {}
    hints: dict[tuple[str, int | None, str], str | None] = {}
    files: dict[tuple[str, int | None, str], str | None] = {}
    waits: dict[tuple[str, int | None, str], tuple[int, int | None] | None] = {}
    repairs: dict[tuple[str, int | None, str], int | None] = {}
    for finding in findings:
        key = (finding.check, finding.line, finding.message)
        files.setdefault(key, finding.file)
        waits.setdefault(key, finding.missing_wait)
        repairs.setdefault(key, finding.repair_line)
        ranks = ranks_of.setdefault(key, [])
        hints.setdefault(key, finding.hint)
        if finding.rank is not None:
            ranks.append(finding.rank)
    shown: dict[tuple[str, int | None], list[Diagnostic]] = {}
    hidden: dict[tuple[str, int | None], int] = {}
    diagnostics = []
    for (check, line, message), ranks in ranks_of.items():
        per_line = shown.setdefault((check, line), [])
        if len(per_line) >= MAX_PER_LINE:
            hidden[(check, line)] = hidden.get((check, line), 0) + 1
            continue
        if ranks and len(set(ranks)) == world and world > 1:
            where = " (on every rank)"
        elif ranks:
            where = f" (on rank{'s' if len(set(ranks)) > 1 else ''} {rank_ranges(ranks)})"
        else:
            where = ""
        diagnostic = Diagnostic(check, ERROR, f"{message}{where}.", line, hint=hints[(check, line, message)],
                                file=files[(check, line, message)], missing_wait=waits[(check, line, message)],
                                repair_line=repairs[(check, line, message)])
        per_line.append(diagnostic)
        diagnostics.append(diagnostic)
    for key, count in hidden.items():
        last = shown[key][-1]
        last.message = f"{last.message[:-1]}; and {count} more like it at this line."
    return diagnostics
