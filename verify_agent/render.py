"""Reports for people (rich text), machines (JSON) and code-scanning UIs (SARIF 2.1.0)."""
from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from verifier.report import ERROR, NOTE, UNSUPPORTED, VERIFIED, VIOLATIONS, WARNING, Diagnostic, Report

_VERDICT_STYLE = {VERIFIED: "bold green", VIOLATIONS: "bold red", UNSUPPORTED: "bold yellow"}
_SEVERITY_STYLE = {ERROR: "red", WARNING: "yellow", NOTE: "cyan"}
TOOL_URI = "https://github.com/verify-agent/verify-agent"


def render_json(report: Report) -> str:
    attach_repair_lines(report)
    return json.dumps(report.to_json(), indent=2, default=str)


def first_changed_line(patch: str) -> int | None:
    """The line of the original file a unified diff changes first; for a pure insertion, the line
    after which it inserts (0 when it inserts at the top)."""
    old = None
    for line in patch.splitlines():
        if line.startswith("@@"):
            match = re.match(r"@@ -(\d+)(?:,(\d+))? ", line)
            if match is None:
                return None
            start, count = int(match.group(1)), match.group(2)
            old = start - 1 if count == "0" else start   # ",0": nothing removed, insertion after ``start``
            if count == "0":
                return start
        elif old is None or line.startswith(("---", "+++")):
            continue
        elif line.startswith("-"):
            return old
        elif line.startswith("+"):
            return max(old - 1, 0)
        else:
            old += 1
    return None


def attach_repair_lines(report: Report) -> None:
    """A violation found with a verified fix names the line where the repair goes (the best fix's
    first change in this file); ``line`` stays where the first diverging value is produced."""
    if not report.fixes:
        return
    repair = first_changed_line(report.fixes[0].patch)
    if repair is None:
        return
    for diagnostic in report.diagnostics:
        if diagnostic.severity == ERROR and diagnostic.check != "unsupported" and diagnostic.repair_line is None:
            diagnostic.repair_line = repair


def _summary(report: Report) -> Text:
    errors = sum(1 for d in report.diagnostics if d.severity == ERROR and d.check != "unsupported")
    text = Text()
    text.append(report.verdict.upper(), style=_VERDICT_STYLE[report.verdict])
    where = report.file or "<program>"
    mesh = ",".join(f"{k}={v}" for k, v in report.mesh.items())
    text.append(f"  {where}" + (f"  mesh {mesh}" if mesh else "") + f"  {report.ops} ops  {report.seconds:.2f}s")
    if errors:
        text.append(f"  {errors} violation{'s' if errors != 1 else ''}", style="red")
    return text


def _source_line(source_lines: list[str] | None, line: int | None) -> str | None:
    if source_lines is None or line is None or not 1 <= line <= len(source_lines):
        return None
    return source_lines[line - 1].rstrip()


def _counterexample_tables(diagnostic: Diagnostic) -> list[Table]:
    cex = diagnostic.counterexample
    tables = []
    inputs = Table(title="counterexample inputs", show_header=True, header_style="bold")
    inputs.add_column("input")
    inputs.add_column("value")
    for name, value in cex.inputs.items():
        inputs.add_row(name, _short(value))
    tables.append(inputs)
    values = Table(title=cex.note, show_header=True, header_style="bold")
    values.add_column("where")
    values.add_column("value")
    for name, value in cex.reference.items():
        values.add_row(f"single device: {name}", _short(value))
    for rank, entries in cex.per_rank.items():
        for name, value in entries.items():
            values.add_row(f"{rank}: {name}", _short(value))
    if not values.rows and cex.value:  # a fault re-run on floats: what the run showed, not a value table
        values.add_row("re-run", _short(cex.value))
    if values.rows:
        tables.append(values)
    return tables


def _lines_of(path: str) -> list[str] | None:
    """The lines of another file a diagnostic points into (a module of the user's package)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None


def _short(value: Any, limit: int = 90) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_text(report: Report, console: Console, source_lines: list[str] | None = None, show_ir: str | None = None
                ) -> None:
    if show_ir:
        console.print(Text(show_ir.rstrip(), style="dim"))
    attach_repair_lines(report)
    for diagnostic in report.diagnostics:
        style = _SEVERITY_STYLE.get(diagnostic.severity, "")
        shown_file = diagnostic.file or report.file
        location = f"{shown_file or '<program>'}:{diagnostic.line}" if diagnostic.line else (report.file or "")
        head = Text()
        head.append(f"{diagnostic.severity}", style=f"bold {style}")
        head.append(f" [{diagnostic.check}] ", style="dim")
        head.append(f"{location}: " if location else "")
        head.append(diagnostic.message)
        console.print(head)
        code = _source_line(_lines_of(diagnostic.file) if diagnostic.file else source_lines, diagnostic.line)
        if code is not None:
            console.print(Text(f"    {diagnostic.line:>4} | {code}", style="dim"))
        if diagnostic.repair_line is not None and diagnostic.repair_line != diagnostic.line:
            repair_code = _source_line(source_lines, diagnostic.repair_line)
            console.print(Text(f"    the repair goes at line {diagnostic.repair_line}"
                               + (f": {repair_code.strip()}" if repair_code else ""), style="green"))
        if diagnostic.hint:
            console.print(Text(f"    hint: {diagnostic.hint}", style="cyan"))
        if diagnostic.counterexample is not None:
            for table in _counterexample_tables(diagnostic):
                console.print(table)
    for fix in report.fixes:
        console.print(Text(f"fix (comm cost {fix.comm_cost:.3g}): {fix.description}", style="green"))
        console.print(Text(fix.patch.rstrip(), style="green"))
    for fact in report.proven:  # every verdict says what was proven, on which sizes, assuming what
        console.print(Text(f"  proven: {fact}", style="green"))
    passes = report.extra.get("passes")
    if passes:
        console.print(Text("  passes: " + "; ".join(f"{name} {state}" for name, state in passes.items()), style="dim"))
    if report.extra.get("sizes"):
        console.print(Text(f"  sizes: {report.extra['sizes']}", style="dim"))
    for assumption in report.extra.get("assumed", []):
        console.print(Text(f"  assumed: {assumption}", style="dim"))
    if report.extra.get("llm_status"):
        console.print(Text(f"  {report.extra['llm_status']}", style="dim"))
    console.print(_summary(report))


def render_sarif(reports: list[Report]) -> str:
    """SARIF 2.1.0 with one result per error/warning diagnostic, located on its source line."""
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for report in reports:
        attach_repair_lines(report)
        for diagnostic in report.diagnostics:
            if diagnostic.severity == NOTE:
                continue
            rule_id = f"verify-agent/{diagnostic.check}"
            rules.setdefault(rule_id, {"id": rule_id, "shortDescription": {"text": f"{diagnostic.check} check"}})
            result: dict[str, Any] = {
                "ruleId": rule_id,
                "level": "error" if diagnostic.severity == ERROR else "warning",
                "message": {"text": diagnostic.message + (f" Hint: {diagnostic.hint}" if diagnostic.hint else "")},
            }
            if report.file:
                location: dict[str, Any] = {"artifactLocation": {"uri": diagnostic.file or report.file}}
                if diagnostic.line:
                    location["region"] = {"startLine": diagnostic.line}
                    if diagnostic.column:
                        location["region"]["startColumn"] = diagnostic.column
                result["locations"] = [{"physicalLocation": location}]
                if diagnostic.repair_line:
                    result["relatedLocations"] = [{
                        "id": 1, "message": {"text": "the repair goes here"},
                        "physicalLocation": {"artifactLocation": {"uri": report.file},
                                             "region": {"startLine": diagnostic.repair_line}}}]
            properties: dict[str, Any] = {}
            if diagnostic.counterexample is not None:
                properties["counterexample"] = diagnostic.counterexample.to_json()
            if diagnostic.repair_line is not None:
                properties["repair_line"] = diagnostic.repair_line
            if properties:
                result["properties"] = properties
            results.append(result)
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "verify-agent", "informationUri": TOOL_URI,
                                      "rules": list(rules.values())}},
                  "results": results}],
    }
    return json.dumps(sarif, indent=2, default=str)


def render_github(reports: list[Report]) -> str:
    """GitHub Actions workflow commands: findings appear as annotations on the diff."""
    lines = []
    for report in reports:
        attach_repair_lines(report)
        for diagnostic in report.diagnostics:
            if diagnostic.severity == NOTE:
                continue
            level = "error" if diagnostic.severity == ERROR else "warning"
            where = f"file={diagnostic.file or report.file}" + (f",line={diagnostic.line}" if diagnostic.line else "")
            message = diagnostic.message + (f" Hint: {diagnostic.hint}" if diagnostic.hint else "")
            escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            lines.append(f"::{level} {where},title=verify-agent {diagnostic.check}::{escaped}")
        lines.append(f"::notice file={report.file}::verify-agent: {report.verdict}")
    return "\n".join(lines)
