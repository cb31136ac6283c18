"""Shared helpers: run the temporal checks on `.vir` text and read the verdict like the CLI."""
from __future__ import annotations

import textwrap

from verifier.report import Report
from verifier.temporal import analyse_program
from verifier.text_format import parse_program


def check_vir(text: str) -> Report:
    """The Report the CLI would build from the temporal checks alone."""
    program = parse_program(textwrap.dedent(text))
    result = analyse_program(program)
    return Report(None, dict(program.mesh.dims), result.diagnostics, proven=result.proven)


def only(report: Report, check: str):
    """The single diagnostic of ``check``; fails listing everything found otherwise."""
    found = [d for d in report.diagnostics if d.check == check]
    assert len(found) == 1, [(d.check, d.line, d.message) for d in report.diagnostics]
    return found[0]
