"""Which edit that does not verify still made headway: the program a second edit starts from.

A file with two bugs gets no verified single edit.  The traced repair then builds on an edit whose
re-check shows progress and searches again from its patched program (``traced_fixes``); only the
program after both edits is shown, and only once it verifies and real ranks confirm it.  Three
signs, strongest first: part of the finding fixed (``improves``), a finding the first one hid now
shown (``moves_on``), the run going wrong somewhere else with no pass newly violated (``shifts``).
An edit that makes a rank raise, or leaves nothing checked, is never headway.
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

from verifier.report import ERROR, Report

NOT_FINDINGS = ("unsupported", "scale", "sandbox", "translation", "assumption")
_CULPRIT = re.compile(r"first go wrong at ([\w.]+) \(line (\d+)\)")
_BLOCKED = re.compile(r"is blocked in [^;]*? at line (\d+)")
_GRADIENT_OF = re.compile(r"\bgradient of ([A-Za-z_]\w*) differs")   # an entry input's, not a parameter's
_RAISES = "raises where the single-device run does not"


def sites_of(report: Report):
    """Where the traced run goes wrong: each finding's culprit line (with its op) and its own line."""
    from frontends.patches.at_line import Site, short_op

    sites: list = []
    for diagnostic in report.diagnostics:
        if diagnostic.severity != ERROR or diagnostic.check in NOT_FINDINGS:
            continue
        gradient = "gradient" in diagnostic.message
        named = _GRADIENT_OF.search(diagnostic.message)
        leaf = named.group(1) if named else ""
        for match in _CULPRIT.finditer(diagnostic.message):
            sites.append(Site(int(match.group(2)), short_op(match.group(1)), gradient, input=leaf))
        if diagnostic.line is not None:
            op = next((s.op for s in sites if s.line == diagnostic.line), "")
            if not op and "partial sum" in diagnostic.message:   # a value never reduced: reduce it there
                op = "partial"
            if diagnostic.check == "async":   # a buffer read before its wait(), or a handle never waited on
                op = "wait"
            if diagnostic.check == "p2p":     # a send or receive without its partner
                op = "p2p"
            if diagnostic.check == "deadlock":   # every blocked call's line: either side may be the one to move
                op = "deadlock"
                sites += [Site(int(line), op) for line in _BLOCKED.findall(diagnostic.message)]
            sites.append(Site(diagnostic.line, op, gradient, input=leaf))
    unique: list = []
    for site in sites:
        if site not in unique:
            unique.append(site)
    return unique


def violated(report: Report) -> set[str]:
    return {name for name, state in (report.extra.get("passes") or {}).items() if state == "violated"}


def finding_kinds(report: Report) -> Counter:
    """How many error findings of each check (``async``, ``equivalence``, ``p2p``...) the report has."""
    return Counter(d.check for d in report.diagnostics if d.severity == ERROR and d.check not in NOT_FINDINGS)


def _raises(report: Report) -> bool:
    return any(_RAISES in d.message for d in report.diagnostics if d.severity == ERROR)


def _checked(report: Report) -> bool:
    """Something was checked and found wrong: findings left, passes recorded, no rank raising."""
    return report.verdict == "violations" and bool(finding_kinds(report)) and bool(report.extra.get("passes")) \
        and not _raises(report)


def _stopped(report: Report) -> bool:
    """The run itself failed on a rank (it raised, or returned a value of another shape): a finding, and no
    pass checked."""
    return report.verdict == "violations" and bool(finding_kinds(report)) and not report.extra.get("passes")


def improves(before: Report, after: Report) -> bool:
    """The edit fixed part of the finding: a pass ``before`` violated is proven ``after``, or the kinds of
    finding ``after`` are a strict part of ``before``'s (two bugs at once: the waits of a ring added, its
    dropped all-gather still to come; the async checks are not a pass of their own).  A rank that now
    raises fixed nothing."""
    if _raises(after):
        return False
    passes = after.extra.get("passes") or {}
    if any(passes.get(name) == "proven" for name in violated(before)):
        return True
    was, now = finding_kinds(before), finding_kinds(after)
    return bool(now) and now != was and all(now[kind] <= was[kind] for kind in now)


def moves_on(before: Report, after: Report) -> bool:
    """A weaker sign of part fixed: the pass ``before`` violated is no longer violated ``after`` and no more
    passes are, while findings remain.  A wrong forward hides a backward bug (the run stops at the first
    counterexample, the backward is left unproven): a Megatron MLP that lost its reduce on top of its
    copy-to-region, once the reduce is back, shows the input gradient's finding instead (forward not
    proven, backward violated).  So is a run that stopped (a rank raised, or returned a value of another
    shape: no pass was checked) and now goes through, its values checked and still wrong (a split on the
    wrong dim put back, the file's own bug behind it).  A rank that now raises is no such sign (nothing
    is checked)."""
    was, now = violated(before), violated(after)
    if _stopped(before) and _checked(after):   # the run now goes through: what it hid is now checked
        return True
    return _checked(after) and bool(was - now) and len(now) <= len(was)


def shifts(before: Report, after: Report, before_text: str, after_text: str) -> bool:
    """The weakest sign: no pass newly violated, but the run now goes wrong elsewhere (another culprit op or
    line, lines compared through the edit: a line the edit inserted above moves the rest down).  Two bugs in
    one pass: a row-parallel output neither all-reduced nor left undivided (``return y / world`` on a
    partial sum) stays wrong in its forward after either single edit; with ``/ world`` removed the partial
    sum itself is named, and the second edit reduces it."""
    if not _checked(after) or violated(after) - violated(before):
        return False
    moved = line_map(before_text, after_text)
    was = {(moved.get(site.line), site.op) for site in sites_of(before)}
    return {(site.line, site.op) for site in sites_of(after)} != was


def line_map(before: str, after: str) -> dict[int, int]:
    """Line numbers (1-based) of ``before`` that ``after`` keeps unchanged -> their numbers in ``after``."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    moved: dict[int, int] = {}
    for old, new, size in matcher.get_matching_blocks():
        moved.update({old + k + 1: new + k + 1 for k in range(size)})
    return moved


@dataclass
class Base:
    """A single edit that did not verify but made headway: the program a second edit starts from."""

    patched: str
    report: Report
    description: str
    strength: int      # 0 fixed part of the finding, 1 uncovered a hidden finding, 2 goes wrong elsewhere
    named: bool        # made at a line the run named (not a guessed communicating line)

    @property
    def why(self) -> str:
        return ("it fixed part of the finding", "it uncovered the finding the first one hid",
                "the run now goes wrong elsewhere")[self.strength]


def base_of(candidate, before: Report, after: Report, before_text: str, prefix: str = "") -> Base | None:
    """``candidate`` (an ``at_line.Candidate`` on ``before_text``, re-checked as ``after``) as a base, or None;
    ``prefix`` describes the edits ``before_text`` already has."""
    if after.verdict == "verified":
        return None
    strength = 0 if improves(before, after) else 1 if moves_on(before, after) else \
        2 if shifts(before, after, before_text, candidate.patched) else None
    if strength is None:
        return None
    return Base(candidate.patched, after, prefix + candidate.description, strength, not candidate.guessed)


def ranked(bases: list[Base]) -> list[Base]:
    """Strongest sign first; at a line the run named before guessed ones; else in the pool's order."""
    return sorted(bases, key=lambda base: (base.strength, not base.named))
