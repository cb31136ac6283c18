"""The `verify-agent` command line: each command is a plain typed function (typer).

Exit codes (DESIGN.md): 0 verified, 1 violations found, 2 usage/input error, 3 unsupported or
inconclusive.  A user mistake is one line on stderr naming file and line — never a traceback.
"""
from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from verifier.report import EXIT_USAGE, Report

from .render import render_github, render_json, render_sarif, render_text

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


def fail_usage(message: str) -> None:
    """Print one line and exit 2: the user's input is not what we need."""
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_USAGE)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail_usage(f"{path}: no such file")
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        fail_usage(f"{path}: cannot read ({exc.__class__.__name__})")
    return ""


def emit(reports: List[Report], fmt: Format, source_lines: Optional[List[str]] = None,
         ir_text: Optional[str] = None) -> int:
    """Print reports in the chosen format and return the exit code of the worst verdict."""
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
    return max((r.exit_code for r in reports), key=lambda code: (code == 1, code == 3, code))


@app.command()
def check(file: Path = typer.Argument(..., help="An IR program in the .vir text form (or .json)."),
          format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github (annotations)."),
          timeout: int = typer.Option(20, help="Solver timeout per obligation, seconds.")) -> None:
    """Verify an IR program: well-formed, placement-correct, temporal, equivalent to mesh size 1."""
    from verifier.check import check_program

    program = load_program(file)
    report = check_program(program, str(file), timeout_ms=timeout * 1000, progress=_progress(format))
    raise typer.Exit(emit([report], format, _source_lines(program.source, file)))


def _progress(fmt: Format):
    """Progress lines on stderr for people; machine formats stay quiet."""
    if fmt != Format.text or not sys.stderr.isatty():
        return None
    console = Console(stderr=True, highlight=False)
    return lambda message: console.print(f"[dim]{message}[/]")


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
    file: Path = typer.Argument(..., help="A Python file with distributed training code."),
    entry: Optional[str] = typer.Option(None, help="Function or nn.Module class to check."),
    mesh: Optional[str] = typer.Option(None, help="Mesh, e.g. tp=2 or dp=2,tp=4."),
    input: List[str] = typer.Option([], "--input", help="Input shape, e.g. x=8x16 (repeatable)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github (annotations)."),
    dump_ir: bool = typer.Option(False, "--dump-ir", help="Print the IR the file was translated to."),
    fix: bool = typer.Option(False, "--fix", help="Also search for verified fixes of the violations."),
    llm: LLMMode = typer.Option(LLMMode.auto, help="auto: LLM for what the frontend cannot read; full; off."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint (else OPENAI_BASE_URL)."),
    model: Optional[str] = typer.Option(None, help="Model name (else VERIFY_AGENT_MODEL)."),
    max_rounds: int = typer.Option(3, help="LLM feedback rounds."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not use the LLM response cache."),
) -> None:
    """Translate a PyTorch / Megatron / DTensor file to the IR, verify it, report with source lines."""
    from .pipeline import TranslateOptions, translate_and_verify

    source = _read(file)
    options = TranslateOptions(entry=entry, mesh=mesh, inputs=parse_inputs(input), llm=llm.value,
                               base_url=base_url, model=model, max_rounds=max_rounds, no_cache=no_cache, fix=fix)
    progress = Console(stderr=True, highlight=False)
    result = translate_and_verify(source, str(file), options,
                                  progress=(lambda message: progress.print(f"[dim]{message}[/]"))
                                  if format == Format.text else None)
    if result.usage_error:
        fail_usage(result.usage_error)
    raise typer.Exit(emit([result.report], format, source.splitlines(), result.ir_text if dump_ir else None))


@app.command()
def fix(
    file: Path = typer.Argument(..., help="A Python file with distributed training code."),
    top: int = typer.Option(3, "--top", "--top-k", help="How many verified fixes to show."),
    write: bool = typer.Option(False, "--write", help="Apply the cheapest fix and verify the file again."),
    entry: Optional[str] = typer.Option(None, help="Function or nn.Module class to check."),
    mesh: Optional[str] = typer.Option(None, help="Mesh, e.g. tp=2 or dp=2,tp=4."),
    input: List[str] = typer.Option([], "--input", help="Input shape, e.g. x=8x16 (repeatable)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github."),
) -> None:
    """Search verified fixes (unified diffs ranked by communication cost); --write applies the best."""
    from .repair.commands import UsageError, fix_file

    from .pipeline import TranslateOptions

    source = _read(file)
    options = TranslateOptions(entry=entry, mesh=mesh, inputs=parse_inputs(input), llm="off")
    progress = Console(stderr=True, highlight=False)
    try:
        before, _, after = fix_file(str(file), top, write, options=options,
                                    progress=(lambda message: progress.print(f"[dim]{message}[/]"))
                                    if format == Format.text else None)
    except UsageError as error:
        fail_usage(str(error))
    code = emit([before], format, source.splitlines())
    if after is not None:
        if format == Format.text:
            progress.print(f"applied the cheapest fix to {file}; verifying it again:")
        code = emit([after], format, file.read_text(encoding="utf-8").splitlines())
    raise typer.Exit(code)


@app.command()
def review(
    base: str = typer.Option("origin/main", "--base", help="Git ref the changes are compared with."),
    repo: Path = typer.Option(Path("."), "--repo", help="Repository checkout."),
    review_json: Path = typer.Option(Path("verify-agent-review.json"), help="Where to write the review body."),
    sarif: Path = typer.Option(Path("verify-agent.sarif"), help="Where to write the SARIF log."),
) -> None:
    """Check the Python files changed since --base; write a GitHub review (suggestions) and SARIF."""
    import json

    from .repair.commands import UsageError
    from .repair.review import run_review

    progress = Console(stderr=True, highlight=False)
    try:
        body, sarif_text, results = run_review(base, repo, progress=lambda m: progress.print(f"[dim]{m}[/]"))
    except UsageError as error:
        fail_usage(str(error))
    review_json.write_text(json.dumps(body, indent=2), encoding="utf-8")
    sarif.write_text(sarif_text, encoding="utf-8")
    progress.print(f"{len(results)} file(s) checked, {len(body['comments'])} review comment(s) -> {review_json}; "
                   f"SARIF -> {sarif}")
    verdicts = [result.report.exit_code for result in results]
    raise typer.Exit(1 if 1 in verdicts else 3 if 3 in verdicts else 0)


@app.command()
def lift(
    file: Path = typer.Argument(..., help="A TileLang kernel file or TVMScript text."),
    kernel: Optional[str] = typer.Option(None, help="Kernel (PrimFunc) name; default: all in the file."),
    spec: Optional[str] = typer.Option(None, help='Whole-tensor spec, e.g. "C = A @ B".'),
    mesh: Optional[str] = typer.Option(None, help="Mesh for distributed lifting, e.g. tp=4."),
    shard: List[str] = typer.Option([], "--shard", help="Buffer sharding, e.g. A=Shard(1) (repeatable)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json, sarif or github (annotations)."),
) -> None:
    """Lift TileLang / TVM TIR kernels into the IR and check them."""
    from tir_lifter import LiftInputError, run_lift

    source = _read(file)
    try:
        report = run_lift(str(file), kernel, spec, mesh, list(shard))
    except LiftInputError as exc:
        fail_usage(str(exc))
    raise typer.Exit(emit([report], format, source.splitlines(), report.extra.get("derived_program")))


def main() -> None:
    """Console entry: an internal failure is one line and exit 3 (inconclusive), not a traceback."""
    try:
        code = app(standalone_mode=False)  # click returns the Exit code instead of raising it
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except click_exceptions() as usage:
        usage.show()
        sys.exit(EXIT_USAGE)
    except Exception as error:  # noqa: BLE001 - last line of defence for the user
        if os.environ.get("VERIFY_AGENT_DEBUG"):
            raise
        Console(stderr=True).print(f"[bold red]internal error:[/] {error.__class__.__name__}: {error} "
                                   f"(set VERIFY_AGENT_DEBUG=1 for the traceback)", highlight=False)
        sys.exit(3)


def click_exceptions() -> tuple:
    try:  # typer >= 0.20 vendors click
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions
    return (exceptions.UsageError,)

