"""``translate`` when the traced frontend cannot build an entry: an LLM writes a harness, the tracer runs it.

Consulted only when building the entry or its inputs failed (an input error of the entry's arguments,
``TraceFailure.building``), no ``--harness`` was given, ``--llm`` is not ``off``, and an endpoint is
configured or a harness for this (source, entry) is cached or recorded next to the file.  The harness
only builds arguments; the verdict is the traced run's, on the user's code (``agent/harness_writer.py``).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator, Optional

from verifier.report import ERROR, Diagnostic, Report

from .pipeline import LLM_STATUS, NO_ENDPOINT, not_consulted
from .traced import HARNESS_REFUSED, TracedResult

LLM_HARNESS = "llm_harness"   # report key (JSON): what the model did (asked, rounds, accepted/refused and why)


def consult(source: str, path: str, entry: Optional[str], failed: TracedResult, *, base_url: Optional[str],
            model: Optional[str], max_rounds: int, no_cache: bool, llm_deadline: float,
            trace: Callable[[str], Optional[TracedResult]], progress=None) -> tuple[Optional[TracedResult], dict]:
    """``(result, extra)``: the traced result to report (a report when a harness ran, was refused or the
    endpoint failed; ``failed`` itself when no harness ran) and the keys the input-error document carries."""
    from agent import LLMSettings
    from agent.client import LLMUnavailable
    from agent.harness_writer import ACCEPTED, HarnessRun, entry_facts, has_recorded_harness, write_harness

    settings = LLMSettings.from_options(base_url=base_url, model=model, max_rounds=max_rounds, no_cache=no_cache,
                                        llm_deadline=llm_deadline)
    failure = (failed.usage_error or "").strip()
    named = entry_facts(source, entry, failure)[0]   # the name answers are cached under
    if not settings.has_endpoint and not has_recorded_harness(source, path, named, settings.cache_dir):
        return failed, {LLM_STATUS: not_consulted(f"{NO_ENDPOINT}; with one, a model would be asked to write a "
                                                  f"harness building the entry")}

    def run(harness_path: str) -> HarnessRun:
        result = trace(harness_path)
        if result is None:
            return HarnessRun("raised", "the file could not be traced")
        if result.report is not None and HARNESS_REFUSED in result.report.extra:
            return HarnessRun("refused", result.report.extra[HARNESS_REFUSED], result)
        if result.report is not None:
            return HarnessRun(ACCEPTED, "", result)
        message = result.usage_error or result.not_traced or "the run gave no result"
        return HarnessRun("raised", message.removeprefix(f"{path}: "), result)

    try:
        outcome = write_harness(source, path, entry, failure, settings, run, progress)
    except LLMUnavailable as error:   # the endpoint failed or answered nonsense: nothing was decided (exit 3)
        line = " ".join(f"{error.prefix}: {error}".split())[:600]
        report = Report(path, {})
        report.add(Diagnostic("unsupported", ERROR, f"{line}; nothing was verified", hint=failure[:300] or None))
        report.extra[LLM_STATUS] = f"LLM consulted to write a harness: {line}"
        report.extra[LLM_HARNESS] = {"asked": True, "outcome": "unavailable", "message": line,
                                     "verdict_from": "no harness ran: nothing was verified with one"}
        return TracedResult(report), {}
    summary = outcome.summary()
    if not outcome.attempts:   # nothing cached for later rounds and no endpoint: as if never asked
        return failed, {LLM_STATUS: not_consulted(NO_ENDPOINT)}
    if outcome.final == ACCEPTED or outcome.final == "refused":
        result = outcome.result if outcome.result is not None else None
        report = result.report if result is not None and result.report is not None else _refused_report(path, outcome)
        report.extra[LLM_STATUS] = outcome.status_line()
        report.extra[LLM_HARNESS] = summary
        return replace(result, report=report) if result is not None else TracedResult(report), {}
    if outcome.final == "malformed":   # the model never answered with a usable harness: inconclusive
        report = Report(path, {})
        report.add(Diagnostic("unsupported", ERROR, f"LLM gave an invalid answer: {outcome.attempts[-1].message} "
                                                    f"({outcome.rounds} round(s)); nothing was verified",
                              hint=failure[:300] or None))
        report.extra[LLM_STATUS] = outcome.status_line()
        report.extra[LLM_HARNESS] = summary
        return TracedResult(report), {}
    # every harness raised: the entry still cannot be built, which is the user's input to give
    last = outcome.result if isinstance(outcome.result, TracedResult) else None
    message = f"{failure}; an LLM-written harness did not run either ({outcome.rounds} round(s), last: " \
              f"{outcome.attempts[-1].message[:300]}): give one with --harness FILE.py"
    return replace(last or failed, usage_error=message, report=None), {LLM_STATUS: outcome.status_line(),
                                                                        LLM_HARNESS: summary}


def _refused_report(path: str, outcome) -> Report:
    """The harness was refused before it ran (its text does more than build arguments): unsupported."""
    report = Report(path, {})
    report.add(Diagnostic("unsupported", ERROR, f"the LLM-written harness was refused: {outcome.attempts[-1].message}; "
                                                f"nothing was verified"))
    report.extra[HARNESS_REFUSED] = outcome.attempts[-1].message
    return report


@contextlib.contextmanager
def harness_for_fixes(report: Report, given: Optional[Path]) -> Iterator[Optional[str]]:
    """The harness file that built the entry, for ``--fix`` to build each candidate the same way: the
    user's ``--harness``, or the accepted LLM harness written to a temporary file; None without one."""
    if given is not None:
        yield str(given)
        return
    written = (report.extra.get(LLM_HARNESS) or {}).get("harness")
    if not written or report.extra[LLM_HARNESS].get("outcome") != "accepted":
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="verify-agent-harness-") as folder:
        path = os.path.join(folder, "llm_harness.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(written)
        yield path
