"""Caps checked before work is done, each with a message that says which limit was hit.

The numbers are far above what training code needs and far below what would make the tool
allocate gigabytes or run for hours on a hostile input.
"""
from __future__ import annotations

MAX_FILE_BYTES = 2_000_000  # source files and IR files read by any command
MAX_WORLD = 1024  # ranks in a --mesh (product of its sizes)
MAX_INPUT_ELEMENTS = 50_000_000  # elements of all inputs at the file's sizes, for concrete evaluation
MAX_DIAGNOSTICS = 200  # per report printed
MAX_MESSAGE_CHARS = 4_000  # per diagnostic message, hint or patch printed


def _clip(text, limit: int = MAX_MESSAGE_CHARS):
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return text[: limit - 60] + f" … [{len(text) - limit + 60:,} more characters not shown]"


def cap_report(report):
    """Bound what a report prints: at most ``MAX_DIAGNOSTICS`` diagnostics, each text clipped.

    A model's answer or a hostile file can put megabytes into a message; the report stays
    readable and small, and says what it left out.
    """
    from verifier.report import NOTE, Diagnostic

    if len(report.diagnostics) > MAX_DIAGNOSTICS:
        hidden = len(report.diagnostics) - MAX_DIAGNOSTICS
        report.diagnostics = report.diagnostics[:MAX_DIAGNOSTICS]
        report.diagnostics.append(Diagnostic("report", NOTE, f"{hidden:,} more diagnostics not shown"))
    for diagnostic in report.diagnostics:
        diagnostic.message = _clip(diagnostic.message)
        diagnostic.hint = _clip(diagnostic.hint)
    for fix in report.fixes:
        fix.description = _clip(fix.description)
        fix.patch = _clip(fix.patch, 20 * MAX_MESSAGE_CHARS)
    return report
