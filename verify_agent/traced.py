"""``translate`` with the tracing frontend: run the file (world 1 + simulated ranks), check the recording.

Used first when torch is installed and the file imports torch; ``None`` means "use the static
frontend" (no torch, ``--no-exec``, or the file cannot run here, e.g. it imports a package that is
not installed).  Imports stay lazy so that ``check`` and ``lift`` never load torch.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import time
from dataclasses import dataclass
from typing import Callable, Optional

from verifier.report import ERROR, NOTE, Diagnostic, Report

Progress = Optional[Callable[[str], None]]
FRONTEND_NOTE = "traced (ran your code on CPU)"


@dataclass(frozen=True)
class TracedResult:
    report: Optional[Report] = None
    usage_error: Optional[str] = None


def wants_tracing(source: str) -> bool:
    """The file imports torch and torch is installed here."""
    if importlib.util.find_spec("torch") is None:
        return False
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch":
            return True
    return False


def world_of(mesh: Optional[str]) -> int:
    """``tp=2`` or ``dp=2,tp=2`` -> the number of ranks (their product)."""
    if not mesh:
        return 2
    world = 1
    for part in mesh.split(","):
        match = re.fullmatch(r"\s*[A-Za-z_]\w*\s*=\s*(\d+)\s*", part)
        if not match or int(match.group(1)) < 1:
            raise ValueError(f"--mesh {mesh}: expected name=size[,name=size]")
        world *= int(match.group(1))
    return world


def trace_and_verify(source: str, path: str, *, entry: Optional[str], mesh: Optional[str], inputs: dict,
                     layouts: list[str], timeout: float, progress: Progress = None) -> Optional[TracedResult]:
    if not wants_tracing(source):
        return None
    from frontends.traced import TraceFailure, TraceOptions, trace_file
    from frontends.traced.correspondence import LayoutError, parse_layouts
    from verifier.traced_check import check_traced

    started = time.perf_counter()
    try:
        options = TraceOptions(entry=entry, shapes=dict(inputs or {}), layouts=parse_layouts(layouts),
                               world=world_of(mesh), timeout=max(5.0, timeout * 0.5))
    except (LayoutError, ValueError) as error:
        return TracedResult(usage_error=f"{path}: {error}")
    if progress:
        progress(f"running {path} on CPU: one device, then {options.world} simulated ranks")
    outcome = trace_file(path, options, shown_as=path)
    if isinstance(outcome, TraceFailure):
        if outcome.kind in ("cannot-run", "internal"):
            if progress:
                reason = outcome.message.strip().splitlines()[-1] if outcome.message.strip() else outcome.kind
                progress(f"cannot trace {path} ({reason}); reading it without running it")
            return None
        if outcome.kind == "input-error":
            where = f"{path}:{outcome.line}" if outcome.line else path
            return TracedResult(usage_error=f"{where}: {outcome.message}")
        report = Report(path, {"tp": options.world})
        report.extra["frontend"] = FRONTEND_NOTE
        check = "equivalence" if outcome.kind == "violation" else "unsupported"
        report.add(Diagnostic(check, ERROR, outcome.message, line=outcome.line))
        report.seconds = time.perf_counter() - started
        return TracedResult(report)
    if progress:
        progress(f"recorded {len(outcome.reference)} ops on one device and "
                 f"{sum(len(r) for r in outcome.ranks)} on {outcome.world} ranks; checking")
    remaining = max(5.0, timeout - (time.perf_counter() - started))
    # the checker stops itself short of the command's deadline, so a long proof ends as
    # "inconclusive" with what was proven so far instead of the bare --timeout message
    report = check_traced(outcome, timeout_s=max(5.0, remaining * 0.9 - 2.0), progress=progress)
    report.extra["frontend"] = FRONTEND_NOTE
    report.add(Diagnostic("translation", NOTE, f"frontend: {FRONTEND_NOTE}; passes: {', '.join(outcome.passes)}"))
    report.seconds = time.perf_counter() - started
    return TracedResult(report)
