"""``translate`` with the tracing frontend: run the file (world 1 + simulated ranks), check the recording.

Used first when torch is installed and the file imports torch; ``None`` means "use the static
frontend" (no torch, ``--no-exec``, or the file cannot run here, e.g. it imports a package that is
not installed).  Imports stay lazy so that ``check`` and ``lift`` never load torch.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import re
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

from verifier.confirmation import AGREES, REPRODUCED
from verifier.report import ERROR, NOTE, VIOLATIONS, Diagnostic, Report

Progress = Optional[Callable[[str], None]]
FRONTEND_NOTE = "traced (ran your code on CPU)"
# Without --mesh the proof is made on 2 ranks, and the code also runs on 4 simulated ranks,
# checked without the proof: timing (deadlocks, collective order) and values on random inputs.
# Bugs that appear only with more than 2 ranks (a peer that is right only when world == 2, a
# dim that divides by 2 but not 4) are found there.
SCALED_WORLD = 4
PROOF_SHARE, SCALED_SHARE = 0.5, 0.15  # of --timeout, in CPU seconds (see verifier/budget.py)
# a counterexample is re-run with torch (one device and the ranks on gloo) before it is reported;
# children import torch and the user's file, so this is seconds, paid only when there is a finding
CONFIRM_TIMEOUT = 120.0


@dataclass(frozen=True)
class TracedResult:
    report: Optional[Report] = None
    usage_error: Optional[str] = None
    program: Optional[object] = None   # the TracedProgram proven (repair confirms its fixes with it)
    scaled_program: Optional[object] = None   # the TracedProgram of the 4-rank run, when recorded (same use)
    options: Optional[object] = None   # the TraceOptions it was run with
    not_traced: Optional[str] = None   # why the file could not be run here: the static reader decides
    not_traced_line: Optional[int] = None
    needs_harness: bool = False        # the entry or its inputs could not be built: a harness can build them


NOT_TRACED = "not_traced"   # report key (JSON): why the traced frontend refused, when the static reader decided
HARNESS_REFUSED = "harness_refused"   # report key (JSON): why a harness was refused (it did more than build arguments)


def note_not_traced(report: Report, result: Optional[TracedResult]) -> None:
    """Say in ``report`` (the static reader's) why running the file was refused: a JSON key and a note."""
    if result is None or result.not_traced is None:
        return
    report.extra[NOT_TRACED] = {"reason": result.not_traced, "line": result.not_traced_line}
    report.add(Diagnostic("translation", NOTE, f"not traced (the file could not be run here: {result.not_traced}); "
                                               f"read without running it", line=result.not_traced_line))


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


# calls that only distributed code makes (collectives, point-to-point, DTensor and its plans, DDP/FSDP)
_COLLECTIVE_CALL = re.compile(r"\b(all_reduce\w*|all_gather\w*|reduce_scatter\w*|all_to_all\w*|isend|irecv|"
                              r"batch_isend_irecv|dist\.(send|recv|broadcast|reduce|gather|scatter)|"
                              r"redistribute|distribute_tensor|distribute_module|parallelize_module|"
                              r"DistributedDataParallel|fully_shard)\s*\(")


def calls_collectives(source: str) -> bool:
    """The file's text calls a collective (read, never run): a run where none ran checked nothing distributed."""
    return bool(_COLLECTIVE_CALL.search(source))


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
                     layouts: list[str], timeout: float, progress: Progress = None,
                     no_grad: tuple[str, ...] = (), confirm_findings: bool = True,
                     paths: tuple[str, ...] = (), args: tuple[str, ...] = (),
                     harness: Optional[str] = None) -> Optional[TracedResult]:
    """``confirm_findings=False``: a counterexample is reported without re-running the code on gloo
    (repair screens candidate fixes this way: only a candidate that verifies is worth a real run).
    None: use the static frontend (``trace_or_refusal`` also says why)."""
    result = trace_or_refusal(source, path, entry=entry, mesh=mesh, inputs=inputs, layouts=layouts,
                              timeout=timeout, progress=progress, no_grad=no_grad,
                              confirm_findings=confirm_findings, paths=paths, args=args, harness=harness)
    return None if result is None or result.not_traced is not None else result


def trace_or_refusal(source: str, path: str, *, entry: Optional[str], mesh: Optional[str], inputs: dict,
                     layouts: list[str], timeout: float, progress: Progress = None,
                     no_grad: tuple[str, ...] = (), confirm_findings: bool = True,
                     paths: tuple[str, ...] = (), args: tuple[str, ...] = (),
                     harness: Optional[str] = None) -> Optional[TracedResult]:
    """As ``trace_and_verify``; a file that cannot run here gives a result with ``not_traced`` (the
    child's reason) and no report.  None: tracing does not apply (no torch here, or the file does
    not import it)."""
    if not wants_tracing(source):
        return None
    from frontends.traced import TraceFailure, TraceOptions, trace_file_at_worlds
    from frontends.traced.correspondence import NO_GRAD, LayoutError, parse_layouts
    from verifier.traced_check import check_traced

    started = time.perf_counter()
    try:
        statements = {**parse_layouts(layouts), **{name.strip(): NO_GRAD for name in no_grad if name.strip()}}
        options = TraceOptions(entry=entry, shapes=dict(inputs or {}), layouts=statements,
                               world=world_of(mesh), also_worlds=() if mesh else (SCALED_WORLD,),
                               timeout=max(5.0, timeout * 0.5), paths=tuple(paths),
                               args=tuple(args), harness=harness)
    except (LayoutError, ValueError) as error:
        return TracedResult(usage_error=f"{path}: {error}")
    if progress:
        progress(f"running {path} on CPU: one device, then {options.world} simulated ranks")
    outcome, scaled = trace_file_at_worlds(path, options, shown_as=path)
    if isinstance(outcome, TraceFailure):
        if outcome.kind in ("cannot-run", "internal"):
            if progress:
                reason = outcome.message.strip().splitlines()[-1] if outcome.message.strip() else outcome.kind
                progress(f"cannot trace {path} ({reason}); reading it without running it")
            return TracedResult(not_traced=_refusal(outcome), not_traced_line=outcome.line)
        if outcome.kind in ("input-error", "harness-error"):
            where = f"{path}:{outcome.line}" if outcome.line and outcome.kind == "input-error" else path
            return TracedResult(usage_error=f"{where}: {outcome.message}", needs_harness=outcome.building)
        report = Report(path, {"tp": options.world})
        report.extra["frontend"] = FRONTEND_NOTE
        _note_isolation(report)
        gloo_raise = (lambda: _raise_on_gloo(options.world, path, options, timeout, progress, "ranks never finish")) \
            if confirm_findings else None
        if _hangs_first(outcome, report, gloo_raise):
            _shown_files(report)
            report.seconds = time.perf_counter() - started
            return TracedResult(report)
        raised = _raise_on_gloo(options.world, path, options, timeout, progress, shape_of=outcome.shape_of) \
            if (outcome.rank_raised or outcome.shape_of) and confirm_findings else None
        if raised is None or raised.outcome == REPRODUCED:
            check = "equivalence" if outcome.kind == "violation" else "unsupported"
            message = f"{outcome.message}; {raised.detail}" if raised is not None else outcome.message
            report.add(Diagnostic(check, ERROR, message, line=outcome.line, file=outcome.file,
                                  repair_line=outcome.repair_line if outcome.kind == "violation" else None))
        else:
            report.add(Diagnostic("unsupported", ERROR, _raise_not_reproduced(outcome, raised), line=outcome.line,
                                  file=outcome.file))
        if outcome.kind == "harness-refused":
            report.extra[HARNESS_REFUSED] = outcome.message
        _shown_files(report)
        report.seconds = time.perf_counter() - started
        return TracedResult(report)
    if progress:
        progress(f"recorded {len(outcome.reference)} ops on one device and "
                 f"{sum(len(r) for r in outcome.ranks)} on {outcome.world} ranks; checking")
    # the proof's budget is CPU time and solver steps, a share of --timeout that does not depend on
    # how long the run took or how busy the machine is (the same verdict under load); a long proof
    # ends as "inconclusive" with what was proven so far, and the wall-clock --timeout stays the
    # command's outer bound
    confirm = _confirmer(path, options, timeout, progress) if confirm_findings else None
    report = check_traced(outcome, timeout_s=max(5.0, timeout * PROOF_SHARE), progress=progress, confirm=confirm,
                          communicates=calls_collectives(source))
    if SCALED_WORLD in options.also_worlds and report.verdict != VIOLATIONS:
        budget = max(2.0, timeout * SCALED_SHARE)
        raise_check = (lambda world, shape_of=None: _raise_on_gloo(world, path, options, timeout, progress,
                                                                     shape_of=shape_of)) if confirm_findings else None
        _check_scaled(report, scaled.get(SCALED_WORLD), budget, progress, confirm, raise_check)
    report.extra["frontend"] = FRONTEND_NOTE
    _note_isolation(report)
    _shown_files(report)
    _wait_repair_lines(report, source)
    report.add(Diagnostic("translation", NOTE, f"frontend: {FRONTEND_NOTE}; passes: {', '.join(outcome.passes)}"))
    report.seconds = time.perf_counter() - started
    scaled_program = scaled.get(SCALED_WORLD)
    return TracedResult(report, program=outcome, options=options,
                        scaled_program=None if isinstance(scaled_program, TraceFailure) else scaled_program)


def _wait_repair_lines(report: Report, source: str) -> None:
    """A wait the checked file misses gets the line after which it goes (``frontends/traced/wait_lines.py``)."""
    from frontends.traced.wait_lines import wait_repair_line
    for diagnostic in report.diagnostics:
        if diagnostic.missing_wait is not None and diagnostic.repair_line is None:
            diagnostic.repair_line = wait_repair_line(source, *diagnostic.missing_wait)


def _shown_files(report: Report) -> None:
    """A diagnostic's other file (a module of the user's package) as the user names files: relative
    to the working directory when it lies below it."""
    here = os.path.join(os.getcwd(), "")
    for diagnostic in report.diagnostics:
        if diagnostic.file and os.path.isabs(diagnostic.file) and diagnostic.file.startswith(here):
            diagnostic.file = os.path.relpath(diagnostic.file, here)


def _refusal(outcome) -> str:
    """The child's reason in one line; a bug of ours (a traceback) is its last line, said as ours."""
    text = outcome.message.strip()
    if outcome.kind == "internal":
        last = text.splitlines()[-1] if text else "no message"
        return f"the tracing frontend failed (a bug of verify-agent: {last})"
    return " ".join(text.split())


def _note_isolation(report: Report) -> None:
    """How the file was run; said as a note only when Linux namespaces were not available."""
    from frontends.sandbox import describe_isolation, isolation

    report.extra["sandbox"] = isolation()
    if isolation() != "namespaces":
        report.add(Diagnostic("sandbox", NOTE, describe_isolation()))


def _confirmer(path: str, options, timeout: float, progress: Progress):
    """The ``Confirm`` of the traced check: the user's file run for real with a counterexample."""
    def confirm(program, finding):
        from frontends.traced.confirm import confirm_on_ranks

        if progress:
            progress(f"confirming a counterexample with torch: {path} on one device and on {program.world} gloo ranks")
        return confirm_on_ranks(program, finding, path=path, shown_as=path, entry=options.entry,
                                shapes=options.shapes, timeout=max(30.0, min(CONFIRM_TIMEOUT, timeout * 0.5)),
                                memory_bytes=options.memory_bytes, paths=options.paths,
                                args=options.args, harness=options.harness)
    return confirm


def _hangs_first(failure, report: Report, gloo_raise=None) -> bool:
    """A wrong output shape found on simulated ranks that never block: when their recorded ops deadlock (or
    otherwise never finish on real ranks), that is the finding - real ranks never return an output - and the
    shape is said in a note, as the traced check does when values cannot be compared.  A message a rank sends
    to or receives from itself fails on real ranks before any output too.  Either is the finding only when
    real gloo ranks (``gloo_raise``: ``_raise_on_gloo``; None when findings are not confirmed) fail as well."""
    if failure.kind != "violation" or not failure.rank_ops or failure.rank_raised:
        return False
    from verifier.traced_check import report_timing
    from verifier.traced_temporal import MalformedRecording, MessageToSelf, analyse

    proven: list[str] = []
    try:
        temporal = analyse(failure.rank_ops, dict(failure.mesh or {}))
        if not temporal.hangs:
            return False
        found, proven, why = temporal.diagnostics, temporal.proven, "some ranks never finish"
    except MessageToSelf as problem:
        found = [Diagnostic("p2p", ERROR, str(problem), line=problem.op.span.line)]
        why = "a rank's message to itself fails on real ranks"
    except MalformedRecording:
        return False
    confirmed = gloo_raise() if gloo_raise is not None else None
    if confirmed is not None and confirmed.outcome != REPRODUCED:
        return False
    report_timing(report, found, confirmed)
    report.proven.extend(proven)
    report.add(Diagnostic("equivalence", NOTE, f"values not compared: {why} (the simulated ranks, which do not "
                                               f"block, gave: {failure.message})", line=failure.line))
    return True


def _raise_on_gloo(world: int, path: str, options, timeout: float, progress: Progress, why: str = "a rank raised",
                   shape_of: str | None = None):
    """A simulated rank raised where one device did not, returned ``shape_of`` in another shape, or the
    recorded ops say some rank never finishes (``why``): the ``Confirmation`` of real gloo ranks run with
    the same inputs (the simulated process group may raise where gloo does not: an all-to-all with an
    empty input)."""
    from frontends.traced.confirm import confirm_raise

    if progress:
        progress(f"confirming with torch: {path} on one device and on {world} gloo ranks "
                 f"({f'{shape_of} has another shape' if shape_of else why})")
    return confirm_raise(world, path=path, shown_as=path, entry=options.entry, shapes=options.shapes,
                         timeout=max(30.0, min(CONFIRM_TIMEOUT, timeout * 0.5)), memory_bytes=options.memory_bytes,
                         paths=options.paths, args=options.args, harness=options.harness, shape_of=shape_of)


def _raise_not_reproduced(failure, confirmation) -> str:
    if confirmation.outcome == AGREES and failure.shape_of:
        return (f"by the simulated ranks, {failure.message}, but {confirmation.detail} (not a violation; a defect "
                f"of the verifier's simulation)")
    if confirmation.outcome == AGREES:
        return (f"{failure.message}, but {confirmation.detail}: the simulated process group raised, not your code "
                f"(not a violation; a defect of the verifier's simulation)")
    return (f"{failure.message}; not confirmed by torch ({confirmation.detail}); no violation is reported without "
            f"real ranks reproducing it")


def _check_scaled(report: Report, program, budget: float, progress: Progress, confirm=None,
                  raise_check=None) -> None:
    """Fold the 4-rank check into ``report``: its violations become the report's (marked as found
    on 4 ranks); otherwise a note says what was checked there, and that the values were tested.
    ``raise_check(world, shape_of)``: what real gloo ranks say of a rank that raised there, or returned
    ``shape_of`` in another shape (None: not asked)."""
    from frontends.traced import TraceFailure
    from verifier.traced_check import check_traced

    where = f"on {SCALED_WORLD} simulated ranks"
    if program is None:
        report.add(Diagnostic("scale", NOTE, f"not checked {where}: the time limit was reached"))
        return
    if isinstance(program, TraceFailure):
        raised = raise_check(SCALED_WORLD, program.shape_of) \
            if (program.rank_raised or program.shape_of) and raise_check is not None else None
        if program.kind == "violation" and (raised is None or raised.outcome == REPRODUCED):
            message = f"{program.message}; {raised.detail}" if raised is not None else program.message
            report.add(Diagnostic("equivalence", ERROR, f"{where}: {message}", line=program.line,
                                  file=program.file, repair_line=program.repair_line))
        elif program.kind == "violation":
            report.add(Diagnostic("scale", NOTE, f"not checked {where}: {_raise_not_reproduced(program, raised)}",
                                  line=program.line))
        else:
            reason = program.message.strip().splitlines()[-1] if program.message.strip() else program.kind
            report.add(Diagnostic("scale", NOTE, f"not checked {where}: the code did not run there ({reason})",
                                  line=program.line))
        return
    if progress:
        progress(f"checking the run {where} (timing and values on random inputs)")
    scaled = check_traced(program, timeout_s=budget, prove=False, confirm=confirm)
    found = [d for d in scaled.diagnostics if d.severity == ERROR and d.check != "unsupported"]
    for diagnostic in found:
        report.add(replace(diagnostic, message=f"{where}: {diagnostic.message}"))
    for key in ("confirmed_by_torch", "tool_defects"):
        report.extra.setdefault(key, []).extend(scaled.extra.get(key, []))
        if not report.extra[key]:
            del report.extra[key]
    for defect in scaled.extra.get("tool_defects", []):   # the model is wrong at 4 ranks: so is the proof's
        report.add(Diagnostic("unsupported", ERROR, f"{where}: {defect['message']}", defect["line"]))
    report.extra["scaled"] = {"world": SCALED_WORLD, "passes": scaled.extra.get("passes", {}),
                              "proven": list(scaled.proven), "tested": scaled.extra.get("tested")}
    if found:
        return
    temporal = [fact.split(":", 1)[1].strip() for fact in scaled.proven if fact.startswith("temporal:")]
    checked = [f"timing proven ({'; '.join(temporal)})"] if temporal else ["timing not proven"]
    if scaled.extra.get("tested"):
        checked.append(scaled.extra["tested"])
    else:
        reasons = [d.message for d in scaled.diagnostics if d.check == "unsupported"]
        checked.append(f"values not compared ({reasons[0] if reasons else 'not reached'})")
    report.add(Diagnostic("scale", NOTE, f"also run {where}: " + "; ".join(checked)))
