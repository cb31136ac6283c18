"""``translate FILE`` without ``--entry`` on a library file: every distributed entry, one table.

The child imports the file as a run would and lists its distributed entries
(``frontends/traced/discover.py``); each is then traced and checked on its own (its own child, its
own share of ``--timeout``), exactly as ``--entry NAME`` would.  The file's report holds one row per
entry (JSON key ``entries``) and, as diagnostics, each entry's errors and the reason of each entry
that got no verdict; its verdict is the worst of the entries' (violations, else unsupported, else
verified), so the exit code is 1 when any entry has a violation, else 3 when any is unsupported,
else 0.  A file written as a driver for this tool (``forward``, ``build``, ``example_*``) keeps the
single-entry rules.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from verifier.report import ERROR, NOTE, UNSUPPORTED, VERIFIED, VIOLATIONS, Diagnostic, Report

Progress = Optional[Callable[[str], None]]
ENTRIES = "entries"   # report key (JSON): one object per entry


@dataclass
class EntryRow:
    name: str
    kind: str
    line: Optional[int]
    found_because: str
    verdict: str
    reason: str = ""                           # why there is no verdict (unsupported), or the first violation
    assumed: list[str] = field(default_factory=list)
    report: Optional[Report] = None

    def to_json(self) -> dict:
        return {"entry": self.name, "kind": self.kind, "line": self.line, "found_because": self.found_because,
                "verdict": self.verdict, "reason": self.reason or None, "assumed": self.assumed,
                "report": self.report.to_json() if self.report is not None else None}


def entries_to_check(source: str, path: str, paths: tuple[str, ...], timeout: float):
    """What to check in a file given without ``--entry``: a list of candidates (several distributed
    entries: the table), one entry's name (the single-entry path with that entry), or None (the
    single-entry rules as before: a driver written for this tool, a launch script, a file whose one
    distributed entry they pick anyway, no distributed entry, or a file that cannot be imported)."""
    from frontends.traced.found import Discovery
    from frontends.traced.runner import TraceOptions, discover_file

    from .traced import wants_tracing

    if not wants_tracing(source):
        return None
    # importing the file is a share of --timeout: a file that takes longer gets the single-entry path's message
    found = discover_file(path, TraceOptions(paths=tuple(paths), timeout=max(5.0, min(timeout * 0.4, 120.0))))
    if not isinstance(found, Discovery) or found.conventions or not found.entries:
        return None
    if len(found.entries) == 1:
        return None if found.entries[0].name == found.default else found.entries[0].name
    return list(found.entries)


def check_every_entry(source: str, path: str, candidates, *, mesh: Optional[str], layouts: list[str],
                      timeout: float, progress: Progress = None, no_grad: tuple[str, ...] = (),
                      paths: tuple[str, ...] = (), args: tuple[str, ...] = (), harness: Optional[str] = None,
                      remaining: Callable[[], float] = lambda: float("inf"),
                      write_harness: Optional[Callable] = None) -> Report:
    """Trace and check each candidate entry; the file's report with one row per entry.  ``write_harness(name,
    result)``: an entry that could not be built gets another chance (an LLM's harness, ``llm_harness.py``)."""
    from .traced import trace_or_refusal, world_of

    started = time.perf_counter()
    rows = []
    for index, candidate in enumerate(candidates):
        left = len(candidates) - index
        share = max(20.0, min(timeout, remaining() / left)) if remaining() != float("inf") else timeout
        if progress:
            progress(f"entry {index + 1}/{len(candidates)}: {candidate.name} (line {candidate.line})")
        if remaining() < 10.0:
            rows.append(EntryRow(candidate.name, candidate.kind, candidate.line, candidate.why, UNSUPPORTED,
                                 "not checked: the time limit (--timeout) was reached before this entry"))
            continue
        result = trace_or_refusal(source, path, entry=candidate.name, mesh=mesh, inputs={}, layouts=layouts,
                                  timeout=share, progress=progress, no_grad=no_grad, paths=paths, args=args,
                                  harness=harness)
        if write_harness is not None and result is not None and result.needs_harness:
            result = write_harness(candidate.name, result)
        rows.append(_row(candidate, result, path))
    report = Report(path, {"tp": world_of(mesh)})
    report.extra[ENTRIES] = [row.to_json() for row in rows]
    report.extra["frontend"] = "traced (ran your code on CPU), every distributed entry of the file"
    for row in rows:
        _fold(report, row)
    if rows and all(row.verdict == VERIFIED for row in rows):
        report.proven = [f"every entry ({len(rows)}): " + "; ".join(f"{row.name}" for row in rows)]
    report.ops = sum(row.report.ops for row in rows if row.report is not None)
    report.seconds = time.perf_counter() - started
    return report


def _row(candidate, result, path: str) -> EntryRow:
    row = EntryRow(candidate.name, candidate.kind, candidate.line, candidate.why, UNSUPPORTED)
    if result is None:
        row.reason = "the file does not import torch, or torch is not installed here"
    elif result.usage_error:
        row.reason = _without_path(_one_line(result.usage_error), path, row)
    elif result.not_traced is not None:
        row.reason = f"not traced: {_one_line(result.not_traced)}"
    else:
        report = result.report
        row.report, row.verdict = report, report.verdict
        row.assumed = list(report.extra.get("assumptions", []))
        if "llm_harness" in report.extra:   # said in the table: who built this entry
            row.assumed.insert(0, f"harness built by an LLM ({report.extra['llm_harness']['outcome']} after "
                                  f"{report.extra['llm_harness'].get('rounds', 0)} round(s)); the verdict is the "
                                  f"traced run of the file's code")
        errors = [d for d in report.diagnostics if d.severity == ERROR]
        first = next((d for d in errors if d.check != "unsupported"), None) or (errors[0] if errors else None)
        if first is not None:
            row.reason = _one_line(first.message)
            if first.line is not None:
                row.line = first.line
        elif row.verdict == UNSUPPORTED:
            notes = [d.message for d in report.diagnostics if d.check == "unsupported"]
            row.reason = _one_line(notes[0]) if notes else "nothing was proven"
    return row


def _fold(report: Report, row: EntryRow) -> None:
    """The entry's errors (or the reason it got no verdict) as diagnostics of the file's report."""
    if row.verdict == VIOLATIONS and row.report is not None:
        for diagnostic in row.report.diagnostics:
            if diagnostic.severity == ERROR and diagnostic.check != "unsupported":
                report.add(Diagnostic(diagnostic.check, ERROR, f"{row.name}: {diagnostic.message}", diagnostic.line,
                                      diagnostic.counterexample, diagnostic.hint))
    elif row.verdict == UNSUPPORTED:
        report.add(Diagnostic("unsupported", ERROR, f"{row.name}: {row.reason}", row.line))
    else:
        report.add(Diagnostic("entry", NOTE, f"{row.name}: verified ({'; '.join(row.report.proven)})"
                              if row.report is not None else f"{row.name}: verified", row.line))


def _without_path(text: str, path: str, row: EntryRow) -> str:
    """``FILE:LINE: message`` -> ``message``, the line kept on the row (the table names the file once)."""
    if not text.startswith(path):
        return text
    rest = text[len(path):]
    head, _, message = rest[1:].partition(": ") if rest.startswith(":") else ("", "", rest)
    if head.isdigit():
        row.line = int(head)
        return message
    return rest.lstrip(": ")


def _one_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return " ".join(lines[-1].split()) if lines else ""


def render_table(report: Report, console) -> None:
    """The entries as a table, then the file's verdict."""
    from rich.markup import escape
    from rich.table import Table

    from .render import _VERDICT_STYLE, _summary

    table = Table(title=escape(f"{report.file}: {len(report.extra.get(ENTRIES, []))} distributed entries"),
                  show_lines=False)
    for column in ("entry", "verdict", "line", "assumed / built, or why"):
        table.add_column(column, overflow="fold")
    for row in report.extra.get(ENTRIES, []):
        built = [a for a in row["assumed"] if a.startswith("harness built")]
        said = row["reason"] or "; ".join(built) or "as the file builds it"
        # names and reasons come from the child that ran the user's code: never read as markup
        table.add_row(escape(str(row["entry"])), f"[{_VERDICT_STYLE[row['verdict']]}]{row['verdict']}[/]",
                      str(row["line"] or ""), escape(said))
    console.width = max(console.width, 150)
    console.print(table)
    console.print(_summary(report))
