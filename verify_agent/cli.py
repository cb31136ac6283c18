"""The `verify-agent` command line: each command is a plain typed function (typer).

Exit codes (DESIGN.md): 0 verified, 1 violations found, 2 usage/input error, 3 unsupported or
inconclusive (a timeout included), 4 internal error (a bug of ours, said as such).  A user mistake
is one line on stderr naming file and line — never a traceback; machine formats (json, sarif,
github) also print a document on stdout for every ending (``documents.py``).  One ``--timeout``
bounds the whole command (``deadline.py``).
"""
from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from verifier.report import EXIT_USAGE, Report, worst_exit_code

from . import deadline as deadlines
from .documents import INPUT_ERROR, INTERNAL_ERROR, REPORT_BUG, TIMED_OUT, located, render
from .render import render_github, render_json, render_sarif, render_text

EXIT_INTERNAL = 4
EXIT_TIMEOUT = 3
TIMEOUT_HELP = "Seconds for the whole command, every stage included (then exit 3)."

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Prove distributed training code equivalent to its single-device version; repair it.")


class Format(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class LLMMode(str, Enum):
    auto = "auto"
    full = "full"
    off = "off"


class _Session:
    """What the running command prints its endings in: format and file (set by ``begin``)."""

    format: str = "text"
    file: Optional[str] = None
    arm_deadline: bool = False  # only the console entry arms signals; in-process callers do not


def begin(fmt: "Format | str", file: Optional[Path], timeout: Optional[float]) -> deadlines.Deadline:
    """Every command starts here: remember how to report its endings, start its deadline."""
    _Session.format = fmt.value if isinstance(fmt, Enum) else str(fmt)
    _Session.file = str(file) if file is not None else None
    if timeout is not None and timeout <= 0:
        fail_usage(f"--timeout {timeout:g}: expected a positive number of seconds")
    if _Session.arm_deadline:
        err = Console(stderr=True, highlight=False)
        return deadlines.start(timeout, _print_timeout, lambda message: err.print(f"[dim]{escape(message)}[/]"))
    deadline = deadlines.reset(timeout)
    context = _click().globals.get_current_context(silent=True)
    if context is not None:  # in-process callers: the command's deadline ends with the command
        context.find_root().call_on_close(deadlines.release)
    return deadline


def _print_ending(verdict: str, check: str, message: str, label: str, extra: Optional[dict] = None) -> None:
    failure = located(verdict, check, message, _Session.file, deadlines.current().elapsed(), extra)
    document = render(failure, _Session.format)
    if document is not None:
        print(document, flush=True)
    Console(stderr=True).print(f"[bold red]{label}:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _print_timeout(timeout: deadlines.CommandTimeout) -> None:
    _print_ending(TIMED_OUT, "timeout", f"{_Session.file or 'verify-agent'}: {timeout}; nothing was verified "
                                        f"(raise --timeout, or check a smaller part)", "timeout")


def fail_usage(message: str, extra: Optional[dict] = None) -> None:
    """Print one line (and the format's document) and exit 2: the user's input is not what we need."""
    _print_ending(INPUT_ERROR, "input", message, "error", extra)
    raise typer.Exit(EXIT_USAGE)


def _read(path: Path) -> str:
    """The file's text as Python decodes it (BOM, coding cookie, newlines), or exit 2."""
    from .limits import MAX_FILE_BYTES
    from .repair.safe_write import decode_source

    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            fail_usage(f"{path}: {size / 1e6:.1f} MB is more than the {MAX_FILE_BYTES // 10**6} MB verify-agent reads")
        return decode_source(path, path.read_bytes()).text
    except FileNotFoundError:
        fail_usage(f"{path}: no such file")
    except (IsADirectoryError, UnicodeDecodeError, PermissionError, SyntaxError, LookupError, OSError) as exc:
        fail_usage(f"{path}: cannot read ({exc.__class__.__name__})")
    return ""


def emit(reports: List[Report], fmt: Format, source_lines: Optional[List[str]] = None,
         ir_text: Optional[str] = None) -> int:
    """Print reports in the chosen format and return the exit code of the worst verdict."""
    from .limits import cap_report

    reports = [cap_report(report) for report in reports]
    if fmt == Format.json:
        if len(reports) == 1:
            body = render_json(reports[0])
            if ir_text is not None:
                import json
                data = json.loads(body)
                data["ir"] = ir_text
                body = json.dumps(data, indent=2)
            print(body)
        else:
            print("[" + ",\n".join(render_json(r) for r in reports) + "]")
    elif fmt == Format.sarif:
        print(render_sarif(reports))
    elif fmt == Format.github:
        print(render_github(reports))
    else:
        console = Console(highlight=False, soft_wrap=True)
        for report in reports:
            render_text(report, console, source_lines, ir_text)
    return worst_exit_code([r.exit_code for r in reports])


@app.command()
def check(file: Path = typer.Argument(..., help="An IR program in the .vir text form (or .json)."),
          format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github (annotations)."),
          solver_timeout: int = typer.Option(20, "--solver-timeout", help="Solver timeout per obligation, seconds."),
          timeout: float = typer.Option(deadlines.DEFAULT_TIMEOUT, "--timeout", help=TIMEOUT_HELP)) -> None:
    """Verify an IR program: well-formed, placement-correct, temporal, equivalent to mesh size 1."""
    from verifier.check import check_program

    clock = begin(format, file, timeout)
    program = load_program(file)
    per_obligation = max(1.0, clock.remaining(at_most=float(solver_timeout)))
    report = check_program(program, str(file), timeout_ms=int(per_obligation * 1000), progress=_progress(format))
    raise typer.Exit(emit([report], format, _source_lines(program.source, file)))


def _progress(fmt: Format):
    """Progress lines on stderr for people; machine formats stay quiet."""
    if fmt != Format.text or not sys.stderr.isatty():
        return None
    console = Console(stderr=True, highlight=False)
    return lambda message: console.print(f"[dim]{escape(message)}[/]")


def _stage_progress(fmt: Format, always: bool = False):
    """Progress for long stages: printed for text output, always noted for the deadline's progress lines."""
    console = Console(stderr=True, highlight=False)
    show = always or fmt == Format.text

    def report(message: str) -> None:
        deadlines.current().note(message)
        if show:
            console.print(f"[dim]{escape(message)}[/]")

    return report


def load_program(file: Path):
    from verifier.text_format import ParseError, parse_program

    text = _read(file)
    if file.suffix == ".json":
        try:
            from agent.ir_json import program_from_json
        except ImportError:
            fail_usage(f"{file}: JSON IR needs the agent package")
        try:
            return program_from_json(text)
        except ValueError as exc:
            fail_usage(f"{file}:1: expected IR JSON matching the schema: {str(exc).splitlines()[0]}")
    try:
        return parse_program(text, str(file))
    except ParseError as exc:
        fail_usage(str(exc))


def _source_lines(source: Optional[str], relative_to: Path) -> Optional[List[str]]:
    if not source:
        return None
    candidate = (relative_to.parent / source) if not os.path.isabs(source) else Path(source)
    try:
        return candidate.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None


def check_mesh_size(mesh: Optional[str]) -> None:
    """Refuse a --mesh with more ranks than verify-agent simulates, before any work (exit 2)."""
    import math
    import re

    from .limits import MAX_WORLD

    sizes = [int(size) for size in re.findall(r"=\s*(\d{1,30})\s*(?:,|$)", mesh or "")]
    if sizes and math.prod(sizes) > MAX_WORLD:
        fail_usage(f"--mesh {mesh}: {math.prod(sizes):,} ranks is more than the {MAX_WORLD} verify-agent simulates; "
                   f"the same proof holds with fewer ranks of each kind")


def parse_inputs(values: List[str]) -> dict:
    shapes = {}
    for value in values:
        name, _, dims = value.partition("=")
        try:
            shapes[name.strip()] = [int(d) for d in dims.lower().split("x")] if dims else []
        except ValueError:
            fail_usage(f"--input {value}: expected name=8x16")
        if not name.strip() or not dims:
            fail_usage(f"--input {value}: expected name=8x16")
    return shapes


@app.command()
def translate(
    file: Path = typer.Argument(..., help="A Python file with distributed training code, or an installed "
                                          "module's name (megatron.core.tensor_parallel.mappings)."),
    entry: Optional[str] = typer.Option(None, help="Function or nn.Module class to check."),
    mesh: Optional[str] = typer.Option(None, help="Mesh, e.g. tp=2 or dp=2,tp=4. Default: proven on 2 ranks "
                                                  "and, for code that runs, also run on 4 (timing and values on "
                                                  "random inputs)."),
    input: List[str] = typer.Option([], "--input", help="Input shape, e.g. x=8x16 (repeatable)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github (annotations)."),
    dump_ir: bool = typer.Option(False, "--dump-ir", help="Print the IR the file was translated to."),
    fix: bool = typer.Option(False, "--fix", help="Also search for verified fixes of the violations."),
    llm: LLMMode = typer.Option(LLMMode.auto, help="auto: LLM for what the frontends cannot read; full: the whole "
                                                   "file (after a traced run that shows no bug); off."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint (else OPENAI_BASE_URL)."),
    model: Optional[str] = typer.Option(None, help="Model name (else VERIFY_AGENT_MODEL)."),
    max_rounds: int = typer.Option(3, help="LLM feedback rounds."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not use the LLM response cache."),
    llm_deadline: float = typer.Option(120.0, "--llm-deadline",
                                       help="Seconds for all LLM requests, retries included (then exit 3)."),
    no_exec: bool = typer.Option(False, "--no-exec", help="Never run the file's code (no tracing, no execution "
                                                          "triage of LLM findings)."),
    timeout: float = typer.Option(deadlines.DEFAULT_TIMEOUT, "--timeout", help=TIMEOUT_HELP),
    param_layout: List[str] = typer.Option([], "--param-layout", help="Layout of a parameter on the ranks, e.g. "
                                           "fc1.weight=Shard(0) or fc1.weight=Replicate (repeatable; traced runs)."),
    expect: List[str] = typer.Option([], "--expect", help="A rank block of an entry input or output, e.g. "
                                     "x=Shard(1) (rank r is given block r of x along dim 1) or out=Shard(2) (rank "
                                     "r returns block r of the output along dim 2; out1: the second output): a "
                                     "reshard is checked as one (repeatable; traced runs)."),
    no_grad: List[str] = typer.Option([], "--no-grad", help="An input or parameter that is not trained: its "
                                      "gradient is not compared (repeatable; traced runs). By default every "
                                      "floating input and parameter is differentiable."),
    import_path: List[Path] = typer.Option([], "--path", help="A directory to import from (repeatable): a file "
                                           "under it runs as its dotted module there. By default a file inside a "
                                           "package runs as package.module from the package's import root."),
    arg: List[str] = typer.Option([], "--arg", help="A value for an entry's parameter, NAME=LITERAL (a Python "
                                  "literal: 0.1, True, None, 'causal', (1, 2)); repeatable; traced runs. "
                                  "Parameters with defaults keep them unless given."),
    harness: Optional[Path] = typer.Option(None, "--harness", help="A Python file defining harness(module, world) "
                                           "that builds the entry and its inputs and returns (entry, inputs); it "
                                           "runs where your code runs (sandboxed child) and only builds arguments."),
) -> None:
    """Translate a PyTorch / Megatron / DTensor file to the IR, verify it, report with source lines.

    When torch is installed and the file imports torch, the file's code is RUN on CPU (in a child
    process with a scrubbed environment and a time limit): once on one device and once per
    simulated rank, every op recorded.  A torchrun-style launch script (module-level code, no
    entry function) runs whole on every rank.  A file inside a package runs as package.module (relative
    imports work); an installed module is named by its dotted name or its file's path.
    --no-exec reads the source without running it."""
    from .pipeline import TranslateOptions, translate_and_verify

    if file.is_dir():   # every file under it that imports torch, each as translate FILE --llm off
        given = [name for name, value in (("--entry", entry), ("--input", input), ("--harness", harness),
                                          ("--fix", fix), ("--dump-ir", dump_ir), ("--llm full", llm == LLMMode.full))
                 if value]
        _translate_directory(file, format, timeout, given, mesh=mesh, layouts=(*param_layout, *expect),
                             no_grad=tuple(no_grad), paths=tuple(str(folder) for folder in import_path),
                             args=tuple(arg), warm=not no_exec)
    begin(format, file, timeout)
    if llm_deadline <= 0:
        fail_usage(f"--llm-deadline {llm_deadline:g}: expected a positive number of seconds")
    check_mesh_size(mesh)
    paths = tuple(str(folder) for folder in import_path)
    _check_args(arg)
    file = _module_or_file(file, paths)
    _Session.file = str(file)
    source = _read(file)
    traced_verdict, refused = None, None
    if not no_exec and not dump_ir:
        from verifier.report import VIOLATIONS

        from .pipeline import not_consulted, traced_llm_status
        from .traced import trace_or_refusal

        def run_traced(harness_file: Optional[str]):
            return trace_or_refusal(source, str(file), entry=entry, mesh=mesh, inputs=parse_inputs(input),
                                    layouts=[*param_layout, *expect], timeout=timeout, progress=_stage_progress(format),
                                    no_grad=tuple(no_grad), paths=paths, args=tuple(arg), harness=harness_file)

        if entry is None and harness is None and not input:   # a library file: every distributed entry
            writer = None if llm == LLMMode.off else _harness_writer(source, file, base_url, model, max_rounds,
                                                                     no_cache, llm_deadline, format,
                                                                     [*param_layout, *expect], mesh, timeout,
                                                                     tuple(no_grad), paths, tuple(arg))
            entry = _every_entry(source, file, format, mesh=mesh, layouts=[*param_layout, *expect],
                                 timeout=timeout, no_grad=tuple(no_grad), paths=paths, args=tuple(arg),
                                 write_harness=writer)
        traced = run_traced(str(harness) if harness is not None else None)
        if traced is not None and traced.not_traced is not None:
            refused, traced = traced, None
        harnessed, extra = harness is not None, {}
        if traced is not None and traced.needs_harness and harness is None and llm != LLMMode.off:
            from .llm_harness import consult   # the entry cannot be built: a model may write a harness for it

            traced, extra = consult(source, str(file), entry, traced, base_url=base_url, model=model,
                                    max_rounds=max_rounds, no_cache=no_cache,
                                    llm_deadline=deadlines.current().remaining(at_most=llm_deadline),
                                    trace=run_traced, progress=_stage_progress(format))
            harnessed = traced.report is not None
        if traced is not None:
            if traced.usage_error:
                fail_usage(traced.usage_error, extra or None)
            # --llm full sends the whole file to the model too, unless running it showed a bug:
            # no translation a model writes may argue away what execution showed; a file run with a
            # harness (the user's or a model's) is reported as the run showed it
            if llm != LLMMode.full or traced.report.verdict == VIOLATIONS or harnessed:
                traced.report.extra.setdefault("llm_status", not_consulted("the file ran with the harness you gave "
                                                                           "(--harness)") if harness is not None
                                               else traced_llm_status(llm.value, traced.report.verdict))
                if fix and traced.report.verdict == VIOLATIONS:  # repaired on what the run showed
                    from .repair.traced_fixes import TracedSettings, traced_fixes

                    from .llm_harness import harness_for_fixes

                    with harness_for_fixes(traced.report, harness) as harness_file:   # candidates built alike
                        settings = TracedSettings(entry=entry, mesh=mesh, inputs=parse_inputs(input),
                                                  layouts=tuple(param_layout), harness=harness_file,
                                                  budget_seconds=deadlines.current().remaining(at_most=900.0))
                        traced.report.fixes = [found.as_fix() for found in traced_fixes(
                            source, str(file), traced.report, settings, _stage_progress(format))]
                raise typer.Exit(emit([traced.report], format, source.splitlines()))
            traced_verdict = traced.report.verdict
    options = TranslateOptions(entry=entry, mesh=mesh, inputs=parse_inputs(input), llm=llm.value,
                               base_url=base_url, model=model, max_rounds=max_rounds, no_cache=no_cache, fix=fix,
                               llm_deadline=llm_deadline, no_exec=no_exec)
    result = translate_and_verify(source, str(file), options, progress=_stage_progress(format))
    if result.usage_error:
        _fail_after_refusal(result.usage_error, refused)
    if result.report is not None:
        from .traced import note_not_traced

        note_not_traced(result.report, refused)
    if traced_verdict is not None and result.report is not None:
        from verifier.report import NOTE, Diagnostic

        result.report.add(Diagnostic("translation", NOTE, f"the traced frontend (running the file) found it "
                                                          f"{traced_verdict}; --llm full: the verdict above is the "
                                                          f"model's translation, checked against the source"))
    raise typer.Exit(emit([result.report], format, source.splitlines(), result.ir_text if dump_ir else None))


def _translate_directory(directory: Path, format: Format, timeout: float, given: List[str], **settings) -> None:
    """``translate DIR``: one table (text) or one document (json, sarif, github) for every file under
    DIR that imports torch; exit with the worst file's code (``directory.py``)."""
    from .directory import Settings, check_directory, python_files, render_table

    count = len(python_files(directory))
    # --timeout is each file's; the command's bound is the sum (the deadline's watchdog stays armed)
    begin(format, directory, timeout * max(1, count) if timeout and timeout > 0 else timeout)
    if given:
        fail_usage(f"{directory}: {', '.join(given)} name one file's entry or change one file; a directory "
                   f"is checked file by file with the default entries (give a file instead)")
    if not settings.pop("warm"):
        fail_usage(f"{directory}: --no-exec reads one file without running it; a directory is checked by "
                   f"running its files (give a file instead)")
    check_mesh_size(settings["mesh"])
    _check_args(list(settings["args"]))
    err = Console(stderr=True, highlight=False)
    result = check_directory(directory, Settings(timeout=timeout, **settings),
                             progress=lambda message: err.print(f"[dim]{escape(message)}[/]"),
                             remaining=deadlines.current().remaining)
    if format == Format.json:
        import json

        print(json.dumps(result.to_json(), indent=2, default=str))
    elif format in (Format.sarif, Format.github):
        from .limits import cap_report

        reports = [cap_report(checked.report) if checked.report is not None else _failure_report(checked.failure)
                   for checked in result.files]
        print(render_sarif(reports) if format == Format.sarif else render_github(reports))
    else:
        render_table(result, Console(highlight=False, soft_wrap=True))
    raise typer.Exit(result.exit_code)


def _failure_report(failure) -> Report:
    """An input error (or a failure of ours) on one file of a directory, as a report for SARIF / GitHub."""
    from verifier.report import ERROR, Diagnostic

    report = Report(failure.file, {})
    report.add(Diagnostic(failure.check, ERROR, failure.message, failure.line))
    return report


def _every_entry(source: str, file: Path, format: Format, **settings) -> Optional[str]:
    """Check every distributed entry of a library file and exit with the worst verdict.  Returns the
    entry to check alone when the file has one distributed entry, None when the single-entry rules
    apply (a driver, a launch script, no distributed entry)."""
    from .every_entry import check_every_entry, entries_to_check, render_table

    candidates = entries_to_check(source, str(file), settings["paths"], settings["timeout"])
    if not isinstance(candidates, list):
        return candidates
    report = check_every_entry(source, str(file), candidates, progress=_stage_progress(format),
                               remaining=deadlines.current().remaining, **settings)
    writer = settings.get("write_harness")
    report.extra["llm_status"] = writer.status() if writer is not None else "LLM not consulted: --llm off"
    if format == Format.text:
        render_table(report, Console(highlight=False, soft_wrap=True))
        raise typer.Exit(report.exit_code)
    raise typer.Exit(emit([report], format, source.splitlines()))


def _harness_writer(source: str, file: Path, base_url, model, max_rounds: int, no_cache: bool, llm_deadline: float,
                    format: Format, layouts: list, mesh, timeout: float, no_grad: tuple, paths: tuple, args: tuple):
    """For the every-entry table: an entry that could not be built is offered to an LLM's harness, as
    ``--entry NAME`` would be (``llm_harness.consult``); ``status()`` sums up what the model did."""
    from .llm_harness import consult
    from .traced import trace_or_refusal

    said: list[str] = []

    def write(name: str, failed):
        def run(harness_file: str):
            return trace_or_refusal(source, str(file), entry=name, mesh=mesh, inputs={}, layouts=layouts,
                                    timeout=timeout, progress=_stage_progress(format), no_grad=no_grad,
                                    paths=paths, args=args, harness=harness_file)

        result, extra = consult(source, str(file), name, failed, base_url=base_url, model=model,
                                max_rounds=max_rounds, no_cache=no_cache,
                                llm_deadline=deadlines.current().remaining(at_most=llm_deadline), trace=run,
                                progress=_stage_progress(format))
        status = result.report.extra.get("llm_status") if result.report is not None else extra.get("llm_status")
        said.append(f"{name}: {status}")
        return result

    def status() -> str:
        if not said:
            return "LLM not consulted: every entry was built without a harness, or none could be helped by one"
        return "; ".join(said)

    write.status = status
    return write


def _module_or_file(file: Path, paths: tuple[str, ...]) -> Path:
    """``FILE`` as given, or the file of the installed module it names (found without importing it)."""
    from frontends.traced.location import looks_like_module_name, module_file

    if file.exists() or not looks_like_module_name(str(file)):
        return file
    found = module_file(str(file), paths)
    if found is None:
        fail_usage(f"{file}: no such file, and no module of that name can be imported here "
                   f"(install its package, or add its directory with --path)")
    return Path(found)


def _check_args(values: List[str]) -> None:
    """Each --arg is NAME=LITERAL (read with ast.literal_eval), or exit 2 before anything runs."""
    from frontends.traced.literals import parse_arg

    for value in values:
        try:
            parse_arg(value)
        except ValueError as error:
            fail_usage(str(error))


def _fail_after_refusal(message: str, refused) -> None:
    """The static reader's input error; when the traced frontend refused the file first, its reason too
    (a key of the JSON document and a line on stderr), not only the static reader's complaint."""
    if refused is None:
        fail_usage(message)
    from .traced import NOT_TRACED

    where = f"{_Session.file}:{refused.not_traced_line}" if refused.not_traced_line else _Session.file
    Console(stderr=True).print(f"[bold]not traced:[/] {escape(f'{where}: {refused.not_traced}')}",
                               highlight=False, soft_wrap=True)
    fail_usage(message, {NOT_TRACED: {"reason": refused.not_traced, "line": refused.not_traced_line}})


@app.command()
def fix(
    file: Path = typer.Argument(..., help="A Python file with distributed training code."),
    top: int = typer.Option(3, "--top", "--top-k", help="How many verified fixes to show."),
    write: bool = typer.Option(False, "--write", help="Apply the cheapest fix and verify the file again."),
    entry: Optional[str] = typer.Option(None, help="Function or nn.Module class to check."),
    mesh: Optional[str] = typer.Option(None, help="Mesh, e.g. tp=2 or dp=2,tp=4."),
    input: List[str] = typer.Option([], "--input", help="Input shape, e.g. x=8x16 (repeatable)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github."),
    no_backup: bool = typer.Option(False, "--no-backup", help="With --write: do not keep FILE.orig."),
    timeout: float = typer.Option(deadlines.DEFAULT_TIMEOUT, "--timeout", help=TIMEOUT_HELP),
    no_exec: bool = typer.Option(False, "--no-exec", help="Never run the file's code (read it statically)."),
) -> None:
    """Search verified fixes (unified diffs ranked by communication cost); --write applies the best.

    The file is read as translate reads it: run on CPU when it can run here (each candidate fix is
    run and proven again, then run on real gloo ranks before it is shown), else statically.

    --write changes only the lines of the fix (the other bytes, mixed line endings included, stay
    as they are); it replaces the file atomically (temp file, fsync, rename), or writes in place
    behind an fsynced copy when the file has hard links; keeps FILE.orig unless --no-backup; and
    refuses (exit 2) when the file changed while the fix was searched or another fix --write holds it.
    """
    from .pipeline import TranslateOptions
    from .repair.commands import UsageError, fix_file

    begin(format, file, timeout)
    check_mesh_size(mesh)
    source = _read(file)
    options = TranslateOptions(entry=entry, mesh=mesh, inputs=parse_inputs(input), llm="off", no_exec=no_exec)
    progress = Console(stderr=True, highlight=False)
    try:
        before, _, after = fix_file(str(file), top, write, options=options, progress=_stage_progress(format),
                                    backup=not no_backup)
    except UsageError as error:
        fail_usage(str(error))
    if after is None:
        raise typer.Exit(emit([before], format, source.splitlines()))
    if format == Format.json:  # one document: the file as it is now, with the report it replaced
        import json
        data = json.loads(render_json(after))
        data["before"] = json.loads(render_json(before))
        print(json.dumps(data, indent=2))
        raise typer.Exit(after.exit_code)
    if format == Format.text:
        emit([before], format, source.splitlines())
        progress.print(f"applied the cheapest fix to {escape(str(file))}; verifying it again:")
        raise typer.Exit(emit([after], format, _read(file).splitlines()))
    raise typer.Exit(emit([after], format, _read(file).splitlines()))


@app.command()
def review(
    base: str = typer.Option("origin/main", "--base", help="Git ref the changes are compared with."),
    repo: Path = typer.Option(Path("."), "--repo", help="Repository checkout."),
    review_json: Path = typer.Option(Path("verify-agent-review.json"), help="Where to write the review body."),
    sarif: Path = typer.Option(Path("verify-agent.sarif"), help="Where to write the SARIF log."),
    timeout: float = typer.Option(deadlines.DEFAULT_TIMEOUT, "--timeout", help=TIMEOUT_HELP),
    no_exec: bool = typer.Option(False, "--no-exec", help="Never run the files' code (read them statically)."),
) -> None:
    """Check the Python files changed since --base; write a GitHub review (suggestions) and SARIF."""
    import json

    from .pipeline import TranslateOptions
    from .repair.commands import UsageError
    from .repair.review import run_review

    begin(Format.text, None, timeout)
    progress = Console(stderr=True, highlight=False)
    try:
        body, sarif_text, results = run_review(base, repo, options=TranslateOptions(no_exec=no_exec),
                                               progress=_stage_progress(Format.text, always=True))
    except UsageError as error:
        fail_usage(str(error))
    review_json.write_text(json.dumps(body, indent=2), encoding="utf-8")
    sarif.write_text(sarif_text, encoding="utf-8")
    progress.print(escape(f"{len(results)} file(s) checked, {len(body['comments'])} review comment(s) -> "
                          f"{review_json}; SARIF -> {sarif}"))
    verdicts = [result.report.exit_code for result in results]
    raise typer.Exit(1 if 1 in verdicts else 3 if 3 in verdicts else 0)


@app.command()
def lift(
    file: Path = typer.Argument(..., help="A TileLang kernel file or TVMScript text."),
    kernel: Optional[str] = typer.Option(None, help="Kernel (PrimFunc) name; default: all in the file."),
    spec: List[str] = typer.Option([], "--spec", help='Whole-tensor spec, e.g. "C = A @ B", or per kernel '
                                   'KERNEL="C = A @ B" (repeatable).'),
    mesh: Optional[str] = typer.Option(None, help="Mesh for distributed lifting, e.g. tp=4."),
    shard: List[str] = typer.Option([], "--shard", help="Buffer sharding, e.g. A=Shard(1) (repeatable)."),
    no_exec: bool = typer.Option(False, "--no-exec", help="Do not run the file (read the source text only)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github (annotations)."),
    timeout: float = typer.Option(deadlines.DEFAULT_TIMEOUT, "--timeout", help=TIMEOUT_HELP),
) -> None:
    """Lift TileLang / TVM TIR kernels into the IR and check them.

    With TileLang installed the file runs in a child process (scrubbed environment, time
    limit) and every kernel it elaborates is checked; --no-exec reads the source only.
    """
    from tir_lifter import LiftInputError, run_lift

    begin(format, file, timeout)
    source = _read(file)
    try:
        report = run_lift(str(file), kernel, list(spec), mesh, list(shard), no_exec=no_exec, timeout=timeout)
    except LiftInputError as exc:
        fail_usage(str(exc))
    raise typer.Exit(emit([report], format, source.splitlines(), report.extra.get("derived_program")))


@app.command()
def plan(
    file: Path = typer.Argument(..., help="A Python file: your model as translate runs it (example_module() at "
                                          "reduced sizes) and TRAINING_PLAN = {...}, the real sizes."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
    timeout: float = typer.Option(deadlines.DEFAULT_TIMEOUT, "--timeout", help=TIMEOUT_HELP),
) -> None:
    """Verify a whole training step on your model and parallel configuration.

    Your layers are traced and proven as your real code at reduced sizes; the step around them
    (pipeline schedule, gradient synchronisation, micro-batch loss scaling) is composed and
    checked at the plan's real sizes.  The verdict says what the induction assumes.
    """
    import json

    from verifier.report import EXIT_CODES

    from .plan import PlanError, check_plan_file, render, to_json

    begin(format, file, timeout)
    _read(file)
    try:
        result = check_plan_file(file, timeout=timeout)
    except PlanError as error:
        fail_usage(f"{file}:{error.line}: {error}" if error.line else f"{file}: {error}")
    if format == Format.json:
        print(json.dumps(to_json(result, str(file)), indent=2))
    else:
        print(render(result, str(file)))
    raise typer.Exit(EXIT_CODES[result.verdict])


def main(argv: Optional[List[str]] = None, *, arm_deadline: bool = True) -> None:
    """Console entry: every ending is an exit code and one line (plus a document for machine formats):
    a timeout exits 3, a bug of ours exits 4 and says so — never a traceback.  ``arm_deadline=False``
    runs without the timeout signal and watchdog (callers that run many commands in one process)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _Session.format, _Session.file = _format_in(args), None
    _Session.arm_deadline = arm_deadline
    if arm_deadline:  # the console entry: a process of the same user cannot read our environment
        from frontends.sandbox import harden_parent

        harden_parent()
    deadlines.reset(None)  # until the command arms its own: endings print once per command
    try:
        code = app(args=args, standalone_mode=False)  # click returns the Exit code instead of raising it
        code = code if isinstance(code, int) else 0
    except typer.Exit as done:
        code = done.exit_code
    except deadlines.CommandTimeout as timeout:
        code = _end(lambda: _print_timeout(timeout), EXIT_TIMEOUT)
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except click_exceptions() as usage:
        code = _end(lambda: _print_ending(INPUT_ERROR, "usage", _usage_line(usage), "error"), EXIT_USAGE)
    except RecursionError:
        code = _end(lambda: _print_ending(INPUT_ERROR, "input", f"{_Session.file or 'input'}: nested too deeply "
                                                                "to read", "error"), EXIT_USAGE)
    except MemoryError:
        code = _end(lambda: _print_ending(TIMED_OUT, "limit", f"{_Session.file or 'input'}: ran out of memory; "
                                                              "nothing was verified", "error"), EXIT_TIMEOUT)
    except Exception as error:  # noqa: BLE001 - last line of defence for the user
        if deadlines.current().expired():  # the timeout fired inside a C callback (Z3) and came back wrapped
            timeout = deadlines.CommandTimeout(deadlines.current().seconds or 0.0)
            code = _end(lambda: _print_timeout(timeout), EXIT_TIMEOUT)
        elif os.environ.get("VERIFY_AGENT_DEBUG"):
            raise
        else:
            detail = " ".join(f"{error.__class__.__name__}: {error}".split())[:300]
            code = _end(lambda: _print_ending(INTERNAL_ERROR, "internal", f"{detail} — {REPORT_BUG} "
                                                                          "(VERIFY_AGENT_DEBUG=1 shows the traceback)",
                                              "internal error"), EXIT_INTERNAL)
    deadlines.stop()
    sys.stdout.flush()
    sys.exit(code)


def _end(print_it, code: int) -> int:
    deadlines.stop()
    if deadlines.finish_once():
        print_it()
    return code


def _format_in(args: List[str]) -> str:
    """The --format the command line asks for, read before click parses it (usage errors need it)."""
    for index, arg in enumerate(args):
        if arg in ("--format", "-f") and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--format="):
            return arg.split("=", 1)[1]
    return "text"


def _usage_line(usage) -> str:
    message = usage.format_message() if hasattr(usage, "format_message") else str(usage)
    command = usage.ctx.command_path if getattr(usage, "ctx", None) is not None else "verify-agent"
    return f"{command}: {' '.join(message.split())} (see {command} --help)"


def _click():
    try:  # typer >= 0.20 vendors click
        from typer import _click as click
        from typer._click import exceptions, globals  # noqa: F401 - loaded as attributes of click
    except ImportError:  # pragma: no cover - older typer
        import click
        from click import exceptions, globals  # noqa: F401
    return click


def click_exceptions() -> tuple:
    return (_click().exceptions.UsageError,)

