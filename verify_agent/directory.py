"""``translate DIR``: every ``*.py`` file under DIR that imports torch, each checked as ``translate FILE``.

Each file goes the single-file way (``--llm off``): every distributed entry of a library file
(``every_entry.py``), else the traced run of its entry, else the static reader; a file that is an
input error, or on which the tool fails, is a row of the table and the others go on.  The verdict
(and exit code) is the worst of the files' (``worst_exit_code``: violations, then unsupported, then
errors).  The children that run the files are forked from one warm server
(``frontends/fork_server.py``), so ``import torch`` is paid once per directory, not per file;
``--timeout`` is each file's.
"""
from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from verifier.report import EXIT_CODES, EXIT_USAGE, ERROR, Diagnostic, Report, worst_exit_code

from .documents import INPUT_ERROR, INTERNAL_ERROR, REPORT_BUG, Failure, as_json, located

Progress = Optional[Callable[[str], None]]
EXIT_INTERNAL = 4
VERDICT_OF_EXIT = {code: verdict for verdict, code in EXIT_CODES.items()} | {EXIT_USAGE: INPUT_ERROR,
                                                                              EXIT_INTERNAL: INTERNAL_ERROR}
_SKIPPED_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".tox", ".venv", "venv", "node_modules", ".eggs"}


@dataclass
class Settings:
    mesh: Optional[str] = None
    timeout: float = 300.0                       # per file
    layouts: tuple[str, ...] = ()
    no_grad: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    warm: bool = True


@dataclass
class FileResult:
    path: str
    report: Optional[Report] = None
    failure: Optional[Failure] = None            # an input error or a failure of ours: no report
    cpu_seconds: float = 0.0
    seconds: float = 0.0
    server_start: bool = False                   # a warm server was started during this file (its CPU is here)
    tool_cpu_seconds: float = 0.0                # of it, the tool's own process (the proof, the report)

    @property
    def exit_code(self) -> int:
        if self.report is not None:
            return self.report.exit_code
        return EXIT_USAGE if self.failure.verdict == INPUT_ERROR else EXIT_INTERNAL

    @property
    def verdict(self) -> str:
        return VERDICT_OF_EXIT[self.exit_code]

    def document(self) -> dict:
        """The file's JSON document, as ``translate FILE --format json`` prints it, with its CPU seconds."""
        import json

        from .limits import cap_report
        from .render import render_json

        body = json.loads(render_json(cap_report(self.report)) if self.report is not None else as_json(self.failure))
        body.setdefault("stats", {}).update(cpu_seconds=round(self.cpu_seconds, 3),
                                            tool_cpu_seconds=round(self.tool_cpu_seconds, 3),
                                            server_start=self.server_start)
        return body

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(entry, verdict, line, why) for the table."""
        from .every_entry import ENTRIES

        if self.report is None:
            return [("", self.verdict, str(self.failure.line or ""), _one_line(self.failure.message))]
        if ENTRIES in self.report.extra:
            return [(str(row["entry"]), row["verdict"], str(row["line"] or ""), row["reason"] or "")
                    for row in self.report.extra[ENTRIES]]
        errors = [d for d in self.report.diagnostics if d.severity == ERROR]
        first = next((d for d in errors if d.check != "unsupported"), None) or (errors[0] if errors else None)
        entry = str(self.report.extra.get("entry") or "")
        if first is None:
            return [(entry, self.verdict, "", "; ".join(self.report.proven[:1]))]
        return [(entry, self.verdict, str(first.line or ""), _one_line(first.message))]


@dataclass
class DirectoryResult:
    directory: str
    files: list[FileResult] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (file, why)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        """The worst file's; nothing checked is nothing verified (3)."""
        return worst_exit_code([result.exit_code for result in self.files]) if self.files else EXIT_CODES["unsupported"]

    def to_json(self) -> dict:
        return {"verdict": VERDICT_OF_EXIT[self.exit_code],
                "directory": self.directory, "files": [result.document() for result in self.files],
                "skipped": [{"file": name, "reason": why} for name, why in self.skipped],
                "stats": {"files": len(self.files), "seconds": round(self.seconds, 3),
                          "cpu_seconds": round(self.cpu_seconds, 3)}}


def python_files(directory: Path) -> list[Path]:
    """``*.py`` under ``directory`` in a stable order, without caches and virtual environments."""
    found = []
    for path in sorted(directory.rglob("*.py")):
        if not any(part in _SKIPPED_DIRS for part in path.relative_to(directory).parts[:-1]) and path.is_file():
            found.append(path)
    return found


def check_directory(directory: Path, settings: Settings, progress: Progress = None,
                    remaining: Callable[[], float] = lambda: float("inf")) -> DirectoryResult:
    """Check every file of ``directory`` that imports torch (``wants_tracing``); say which were skipped.
    Files are run in groups of the installed libraries they import (one warm server per group, which
    imports those libraries once: a file never runs beside a library it does not import itself)."""
    from .traced import wants_tracing

    started, cpu_at_start = time.perf_counter(), _cpu_seconds(None)
    result = DirectoryResult(str(directory))
    chosen = []
    for path in python_files(directory):
        source, why = _source(path)
        if source is None:
            result.files.append(FileResult(str(path), failure=located(INPUT_ERROR, "input", f"{path}: {why}",
                                                                       str(path))))
        elif not wants_tracing(source) and _parses(source):   # a syntax error is an input error, said at its line
            result.skipped.append((str(path), "does not import torch (or torch is not installed here)"))
        else:
            chosen.append((path, source))
    if progress and result.skipped:
        progress(f"skipped {len(result.skipped)} file(s) that do not import torch")
    done = 0
    for libraries, group in _groups(chosen, settings):
        with _server(settings, libraries, len(group)) as server:
            for path, source in group:
                done += 1
                if progress:
                    progress(f"file {done}/{len(chosen)}: {path}")
                if remaining() < 10.0:
                    result.files.append(FileResult(str(path), report=_not_reached(str(path))))
                    continue
                before, clock, file_started = _cpu_seconds(server), time.perf_counter(), time.monotonic()
                starts, own = (server.starts if server is not None else 0), _own_cpu_seconds()

                def left(file_started=file_started) -> float:
                    return min(remaining(), settings.timeout - (time.monotonic() - file_started))

                checked = check_file(path, source, settings, progress, left)
                checked.cpu_seconds = _cpu_seconds(server) - before
                checked.tool_cpu_seconds = _own_cpu_seconds() - own
                checked.seconds = time.perf_counter() - clock
                checked.server_start = server is not None and server.starts > starts
                result.files.append(checked)
                if progress:
                    progress(f"  {checked.verdict} ({checked.cpu_seconds:.2f} CPU s)")
    order = {str(path): index for index, path in enumerate(python_files(directory))}
    result.files.sort(key=lambda checked: order.get(checked.path, len(order)))
    result.cpu_seconds = _cpu_seconds(None) - cpu_at_start
    result.seconds = time.perf_counter() - started
    return result


def _groups(chosen: list[tuple[Path, str]], settings: Settings) -> list[tuple[tuple[str, ...], list]]:
    """The files by the installed packages they import (``fork_server.installed_imports``); the
    group importing none first.  Without warm runs: one group, no libraries."""
    if not settings.warm:
        return [((), chosen)] if chosen else []
    from frontends.fork_server import installed_imports
    from frontends.traced.location import locate

    extra = [Path(p) for p in settings.paths]
    groups: dict[tuple[str, ...], list] = {}
    modules: dict[tuple[str, ...], dict[str, None]] = {}
    for path, source in chosen:
        roots = [Path(locate(str(path), settings.paths).root), *extra]
        names = installed_imports([(path, source)], roots)
        key = tuple(sorted({name.split(".")[0] for name in names}))
        groups.setdefault(key, []).append((path, source))
        modules.setdefault(key, {}).update(dict.fromkeys(names))
    return [(tuple(modules[key]), groups[key]) for key in sorted(groups, key=lambda key: (len(key), key))]


def _server(settings: Settings, libraries: tuple[str, ...], files: int):
    import contextlib

    if not settings.warm:
        return contextlib.nullcontext(None)
    from frontends.fork_server import warm_runs

    return warm_runs(cpu_seconds=settings.timeout * files + 60.0, libraries=libraries)


def check_file(path: Path, source: str, settings: Settings, progress: Progress = None,
               remaining: Callable[[], float] = lambda: float("inf")) -> FileResult:
    """One file as ``translate FILE --llm off`` checks it; never raises for what one file does."""
    try:
        return _check_file(str(path), source, settings, progress, remaining)
    except Exception as error:  # noqa: BLE001 - a bug of ours on one file: its row says so, the others go on
        detail = " ".join(f"{error.__class__.__name__}: {error}".split())[:300]
        return FileResult(str(path), failure=Failure(INTERNAL_ERROR, "internal", f"{detail} — {REPORT_BUG}",
                                                     str(path)))


def _check_file(path: str, source: str, s: Settings, progress: Progress, remaining) -> FileResult:
    from .every_entry import check_every_entry, entries_to_check
    from .pipeline import TranslateOptions, traced_llm_status, translate_and_verify
    from .traced import NOT_TRACED, note_not_traced, trace_or_refusal

    layouts = list(s.layouts)
    candidates = entries_to_check(source, path, s.paths, s.timeout)
    if isinstance(candidates, list):   # a library file: every distributed entry, one row each
        report = check_every_entry(source, path, candidates, mesh=s.mesh, layouts=layouts, timeout=s.timeout,
                                   progress=progress, no_grad=s.no_grad, paths=s.paths, args=s.args,
                                   remaining=remaining)
        report.extra["llm_status"] = "LLM not consulted: --llm off"
        return FileResult(path, report=report)
    entry = candidates
    traced = trace_or_refusal(source, path, entry=entry, mesh=s.mesh, inputs={}, layouts=layouts, timeout=s.timeout,
                              progress=progress, no_grad=s.no_grad, paths=s.paths, args=s.args, harness=None)
    refused = None
    if traced is not None and traced.not_traced is not None:
        refused, traced = traced, None
    if traced is not None:
        if traced.usage_error:
            return FileResult(path, failure=located(INPUT_ERROR, "input", traced.usage_error, path))
        traced.report.extra.setdefault("llm_status", traced_llm_status("off", traced.report.verdict))
        return FileResult(path, report=traced.report)
    options = TranslateOptions(entry=entry, mesh=s.mesh, llm="off")
    translated = translate_and_verify(source, path, options, progress=progress)
    if translated.usage_error:
        extra = {NOT_TRACED: {"reason": refused.not_traced, "line": refused.not_traced_line}} if refused else None
        return FileResult(path, failure=located(INPUT_ERROR, "input", translated.usage_error, path, extra=extra))
    note_not_traced(translated.report, refused)
    return FileResult(path, report=translated.report)


def _source(path: Path) -> tuple[Optional[str], str]:
    from .limits import MAX_FILE_BYTES
    from .repair.safe_write import decode_source

    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None, f"more than the {MAX_FILE_BYTES // 10**6} MB verify-agent reads"
        return decode_source(path, path.read_bytes()).text, ""
    except (UnicodeDecodeError, PermissionError, SyntaxError, LookupError, OSError) as error:
        return None, f"cannot read ({error.__class__.__name__})"


def _parses(source: str) -> bool:
    import ast

    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _not_reached(path: str) -> Report:
    report = Report(path, {})
    report.add(Diagnostic("unsupported", ERROR, "not checked: the time limit (--timeout) was reached before this file"))
    return report


def _own_cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _cpu_seconds(server) -> float:
    """CPU seconds of this process, its ended children and the warm server's living tree."""
    own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    live = server.cpu_seconds_used() if server is not None else 0.0
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime + live


def _one_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return " ".join(lines[-1].split()) if lines else ""


def render_table(result: DirectoryResult, console) -> None:
    """One table: file, entry, verdict, line, why; then the skipped files and the directory's verdict."""
    from rich.markup import escape
    from rich.table import Table

    from .render import _VERDICT_STYLE

    styles = {**_VERDICT_STYLE, INPUT_ERROR: "bold yellow", INTERNAL_ERROR: "bold magenta"}
    table = Table(title=escape(f"{result.directory}: {len(result.files)} file(s) checked"))
    for column in ("file", "entry", "verdict", "line", "why / what was proven"):
        table.add_column(column, overflow="fold")
    for checked in result.files:
        name = _relative(checked.path, result.directory)
        for entry, verdict, line, why in checked.rows():
            # names and reasons come from children that ran the user's code: never read as markup
            table.add_row(escape(name), escape(entry), f"[{styles.get(verdict, 'bold')}]{verdict}[/]", line,
                          escape(why))
            name = ""
    console.width = max(console.width, 160)
    console.print(table)
    for name, why in result.skipped:
        console.print(f"skipped {escape(_relative(name, result.directory))}: {escape(why)}")
    counts: dict[str, int] = {}
    for checked in result.files:
        counts[checked.verdict] = counts.get(checked.verdict, 0) + 1
    summary = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    verdict = VERDICT_OF_EXIT[result.exit_code]
    console.print(f"[{styles.get(verdict, 'bold')}]{verdict.upper()}[/]  {escape(result.directory)}  "
                  f"{len(result.files)} file(s): {summary or 'none checked'}  {result.seconds:.1f}s, "
                  f"{result.cpu_seconds:.1f} CPU s")


def _relative(path: str, directory: str) -> str:
    try:
        return str(Path(path).relative_to(directory))
    except ValueError:
        return path
