"""source -> frontend (-> LLM for what it cannot read) -> IR -> verifier -> report (-> fixes).

The one place where the stages of `translate` are chained, so the CLI, `fix` and `review`
share them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from frontends.base import SourceError, Translation
from verifier.report import ERROR, NOTE, Diagnostic, Report

Progress = Optional[Callable[[str], None]]
LLM_STATUS = "llm_status"  # report.extra key: one line saying whether a model was asked, and why not
NO_ENDPOINT = "no endpoint configured (pass --base-url or set OPENAI_BASE_URL)"


def not_consulted(why: str) -> str:
    return f"LLM not consulted: {why}"


def traced_llm_status(mode: str, verdict: str) -> str:
    """Why a report the tracing frontend decided carries no model's work."""
    if mode == "off":
        return not_consulted("--llm off")
    if mode == "full":
        return not_consulted(f"the traced frontend found {verdict} by running the file, and a model cannot "
                             f"overrule what execution showed (--llm full asks one only when the run shows no bug)")
    return not_consulted("the traced frontend decided (it ran the file and recorded every op; --llm auto asks a "
                         "model only for code the frontends cannot read)")


@dataclass
class TranslateOptions:
    entry: Optional[str] = None
    mesh: Optional[str] = None
    inputs: dict = field(default_factory=dict)
    llm: str = "auto"
    base_url: Optional[str] = None
    model: Optional[str] = None
    max_rounds: int = 3
    no_cache: bool = False
    fix: bool = False
    llm_deadline: float = 120.0  # seconds for every LLM request of the command, retries included
    no_exec: bool = False  # never run the user's code (tracing frontend, execution triage)


@dataclass
class TranslateResult:
    report: Optional[Report] = None
    translation: Optional[Translation] = None
    ir_text: Optional[str] = None
    usage_error: Optional[str] = None


def _unsupported_report(path: str, translation: Translation, note: str) -> Report:
    report = Report(path, _mesh_of(translation), ops=len(translation.program.ops) if translation.program else 0)
    for item in translation.unsupported:
        report.add(Diagnostic("unsupported", ERROR, f"cannot translate {item.construct}: {item.reason}", item.line))
    report.add(Diagnostic("unsupported", NOTE, note))
    return report


def _mesh_of(translation: Translation) -> dict:
    if translation.program is None:
        return {}
    return {name: size for name, size in translation.program.mesh.dims}


def translate_and_verify(source: str, path: str, options: TranslateOptions, progress: Progress = None
                         ) -> TranslateResult:
    from frontends import translate_source
    from verifier.check import check_program
    from verifier.text_format import print_program

    started = time.perf_counter()
    try:
        translation = translate_source(source, path, entry=options.entry, mesh=options.mesh,
                                       inputs=options.inputs or None)
    except SourceError as error:
        return TranslateResult(usage_error=str(error))
    incomplete = bool(translation.unsupported) or translation.program is None
    if options.llm == "full" or (options.llm == "auto" and incomplete):
        result = _llm(source, path, translation, options, progress)
        if result.report is not None:
            result.report.seconds = time.perf_counter() - started
        return result
    if incomplete:
        report = _unsupported_report(path, translation, "the LLM translator is off (--llm off); nothing was verified")
        report.extra[LLM_STATUS] = not_consulted("--llm off")
        report.seconds = time.perf_counter() - started
        return TranslateResult(report, translation)
    program = translation.program
    if progress:
        progress(f"translated {path} ({translation.style}, entry {translation.entry}): {len(program.ops)} ops; "
                 f"verifying on mesh {program.mesh}")
    untranslated = getattr(translation, "untranslated_backwards", ())
    # gradients derived from the forward are not the user's backward: check the forward only
    checked = replace(program, gradients=(), backward_ops=()) if untranslated else program
    report = check_program(checked, path, progress=progress,
                           reference_caveats=getattr(translation, "reference_caveats", ()))
    for line, reason in getattr(translation, "uncovered", ()):
        report.add(Diagnostic("unsupported", ERROR, reason, line))  # not verified: code outside the check
    for line, reason in untranslated:
        report.add(Diagnostic("unsupported", ERROR, reason, line))  # a derived backward is not the user's
        report.extra.setdefault("passes", {})["backward"] = "not checked: " + reason
    report.extra["style"] = translation.style
    report.extra["entry"] = translation.entry
    report.extra[LLM_STATUS] = not_consulted("--llm off" if options.llm == "off" else
                                             "the static frontend read the whole file (--llm auto asks a model "
                                             "only for code the frontends cannot read)")
    report.extra.setdefault("assumed", []).insert(0, f"program read by the static frontend ({translation.style}) "
                                                     f"from entry {translation.entry}; branches on the world size "
                                                     f"decided for mesh {program.mesh}")
    if translation.provenance:
        report.extra["provenance"] = translation.provenance
    for note in getattr(translation, "notes", []) or []:
        report.add(Diagnostic("translation", NOTE, str(note)))
    if options.fix and report.verdict == "violations":
        _add_fixes(source, path, translation, report, options, progress)
    report.seconds = time.perf_counter() - started
    return TranslateResult(report, translation, print_program(program))


def _llm(source: str, path: str, translation: Translation, options: TranslateOptions, progress: Progress
         ) -> TranslateResult:
    """The LLM loop decides (and verifies) from here; its report is final, never re-checked,
    since only it carries the execution triage of LLM-written IR."""
    from agent import LLMError, LLMSettings, LLMUnavailable, llm_translate

    from .deadline import current

    budget = current()
    settings = LLMSettings.from_options(base_url=options.base_url, model=options.model, mode=options.llm,
                                        max_rounds=options.max_rounds, no_cache=options.no_cache,
                                        llm_deadline=budget.remaining(at_most=options.llm_deadline),
                                        execute=not options.no_exec,
                                        execution_timeout=max(1.0, budget.remaining(at_most=60.0)))
    try:
        outcome = llm_translate(source, path, translation, settings, progress, entry=options.entry,
                                mesh=_mesh_dict(options.mesh), input_shapes=options.inputs or None)
    except LLMUnavailable as error:  # the endpoint failed or answered nonsense: inconclusive (exit 3)
        return TranslateResult(_llm_failed_report(path, translation, f"{error.prefix}: {error}"), translation)
    except LLMError as error:  # the settings are incomplete: the command line's to fix (exit 2)
        return TranslateResult(usage_error=f"{path}: {error}")
    if outcome.used_llm:
        outcome.report.extra[LLM_STATUS] = f"LLM consulted: {outcome.note}"
    else:
        outcome.report.extra[LLM_STATUS] = not_consulted(NO_ENDPOINT if not settings.has_endpoint else
                                                         "the file does not parse")
    return TranslateResult(outcome.report, outcome.translation, outcome.ir_text)


def _llm_failed_report(path: str, translation: Translation, message: str) -> Report:
    """Exit 3 with the one-line reason first; what the frontend could not read follows."""
    line = " ".join(message.split())[:600]
    report = Report(path, _mesh_of(translation), ops=len(translation.program.ops) if translation.program else 0)
    report.add(Diagnostic("unsupported", ERROR, f"{line}; nothing was verified",
                          hint="run again when the endpoint answers, or use --llm off to see what the frontends "
                               "read"))
    for item in translation.unsupported:
        report.add(Diagnostic("unsupported", ERROR, f"cannot translate {item.construct}: {item.reason}", item.line))
    report.extra[LLM_STATUS] = line
    return report


def _mesh_dict(mesh: Optional[str]) -> Optional[dict]:
    if not mesh:
        return None
    try:
        return {name.strip(): int(size) for name, size in (part.split("=") for part in mesh.split(","))}
    except ValueError:
        return None  # the frontend has already reported a malformed --mesh


def _add_fixes(source: str, path: str, translation: Translation, report: Report, options: TranslateOptions,
               progress: Progress) -> None:
    try:
        from .repair import suggest_fixes
    except ImportError:
        return
    report.fixes.extend(suggest_fixes(source, path, translation, report, progress=progress))
