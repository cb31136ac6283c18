"""``verify-agent fix FILE``: check a file, find verified fixes, optionally apply the best one.

These are plain functions so the command line only parses options and prints.  They sit
at the end of the pipeline (source -> translation -> report -> fixes) and reuse its entry,
``verify_agent.pipeline.translate_and_verify``, for the file before and after the patch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from verifier.report import Fix, Report

from .fixes import SourceFix, source_fixes
from .safe_write import SourceText, WriteRefused, read_source, replace_source

Progress = Optional[Callable[[str], None]]


class UsageError(Exception):
    """The file cannot be read or translated as given (exit code 2)."""


def _options(options=None):
    from ..pipeline import TranslateOptions

    return options if options is not None else TranslateOptions()


def read_file(path: str | Path) -> SourceText:
    """The file's text as Python reads it (encoding cookie, BOM, newlines remembered)."""
    from ..limits import MAX_FILE_BYTES

    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: {size / 1e6:.1f} MB is more than the {MAX_FILE_BYTES // 10**6} MB "
                             f"verify-agent reads")
        return read_source(path)
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as error:
        raise UsageError(f"{path}: cannot read ({error.__class__.__name__})") from None


TRACE_TIMEOUT = 240.0   # seconds for the traced reading of the file itself


def check_text(path: str | Path, source: str, options=None, progress: Progress = None):
    """Verify ``source`` as the contents of ``path`` the way ``translate`` does: by running it
    (traced) when it can run here, else with the static reader; the TranslateResult (its
    ``translation`` is None for a traced reading)."""
    from ..pipeline import translate_and_verify

    options = _options(options)
    traced = None if options.no_exec else _traced(path, source, options, progress)
    if traced is not None:
        return traced
    result = translate_and_verify(source, str(path), options, progress)
    if result.usage_error:
        raise UsageError(result.usage_error)
    return result


def _traced(path: str | Path, source: str, options, progress: Progress):
    from ..deadline import current
    from ..pipeline import TranslateResult, traced_llm_status
    from ..traced import trace_and_verify

    traced = trace_and_verify(source, str(path), entry=options.entry, mesh=options.mesh, inputs=options.inputs or {},
                              layouts=[], timeout=current().remaining(at_most=TRACE_TIMEOUT), progress=progress)
    if traced is None:
        return None
    if traced.usage_error:
        raise UsageError(traced.usage_error)
    traced.report.extra["llm_status"] = traced_llm_status(options.llm, traced.report.verdict)
    return TranslateResult(traced.report)


def is_traced(report: Report) -> bool:
    from ..traced import FRONTEND_NOTE

    return report.extra.get("frontend") == FRONTEND_NOTE


def fixes_for(path: str | Path, source: str, result, options=None, progress: Progress = None, *,
              top_k: int = 3) -> list[SourceFix]:
    """Verified fixes of a checked file, from the reading that checked it (traced or static)."""
    report = result.report
    if report is None or report.verdict == "verified":
        return []
    if is_traced(report):
        from ..deadline import current
        from .traced_fixes import TracedSettings, traced_fixes

        options = _options(options)
        settings = TracedSettings(entry=options.entry, mesh=options.mesh, inputs=options.inputs or None,
                                  budget_seconds=max(0.0, current().remaining(at_most=FIX_BUDGET) - 60.0))
        return traced_fixes(source, str(path), report, settings, progress, top_k=top_k)
    if result.translation is None:
        return []
    return source_fixes(source, str(path), result.translation, report, progress, top_k=top_k)


FIX_BUDGET = 900.0   # seconds for the candidates of one file


def check_file(path: str | Path, options=None, progress: Progress = None):
    """Read and verify one file; (source, TranslateResult)."""
    source = read_file(path).text
    return source, check_text(path, source, options, progress)


def find_fixes(path: str | Path, top_k: int = 3, options=None, progress: Progress = None,
               original: SourceText | None = None) -> tuple[Report, list[SourceFix]]:
    """The file's report (with ``report.fixes`` filled in) and its verified source fixes, cheapest first."""
    source = (original or read_file(path)).text
    with warm(path, source, options):
        result = check_text(path, source, options, progress)
        report = result.report
        fixes = fixes_for(path, source, result, options, progress, top_k=top_k)
    report.fixes = [fix.as_fix() for fix in fixes]
    return report, fixes


def warm(path: str | Path, source: str, options=None):
    """For a file that is traced: the fork server its runs (the file, each candidate, each real-rank
    confirmation, the written file) are forked from (``traced_fixes.warm_for``)."""
    import contextlib

    from ..traced import wants_tracing

    if _options(options).no_exec or not wants_tracing(source):
        return contextlib.nullcontext(None)
    from .traced_fixes import warm_for

    return warm_for(str(path), source, cpu_seconds=FIX_BUDGET + 2 * TRACE_TIMEOUT)


def fix_file(path: str | Path, top_k: int = 3, write: bool = False, *, options=None, progress: Progress = None,
             backup: bool = True) -> tuple[Report, list[Fix], Optional[Report]]:
    """(report before, fixes ranked by communication cost, report after ``--write`` or None).

    With ``write`` the cheapest fix replaces the file (``safe_write.replace_source``: atomic,
    refused if the file changed since it was read, ``FILE.orig`` kept unless ``backup`` is
    False), which is then translated and verified again end to end; the second report is
    what the file says now.
    """
    original = read_file(path)
    with warm(path, original.text, options):
        report, fixes = find_fixes(path, top_k, options, progress, original=original)
        if not write or not fixes:
            return report, report.fixes, None
        try:
            saved = replace_source(original, fixes[0].patched, backup=backup)
        except WriteRefused as refused:
            raise UsageError(str(refused)) from None
        if progress and saved is not None:
            progress(f"the original is kept as {saved}")
        _, after = check_file(path, options, progress)
    return report, report.fixes, after.report
