"""The elaboration child: run the file, build each kernel with TileLang, lift and check it.

``python -m tir_lifter.elaborate REQUEST.json`` runs in a child process started by
``elaborate_run.py`` through ``frontends.sandbox`` (isolated, scrubbed environment, limits): it executes the user's file
(``capture.run_file``), reduces every recorded kernel instance (``instantiate``), lifts
the PrimFunc TileLang builds with TVM's visitors (``tvm_frontend.from_primfunc``) and
checks it against its own spec.  The result is a JSON report in ``frontends.wire``'s
data-only format (never a pickle: the parent must not run anything this process wrote).
"""
from __future__ import annotations

import ast
import inspect
import json
import re
import signal
import sys
import time
from dataclasses import replace
from typing import Any

from verifier.report import ERROR, NOTE, WARNING, Diagnostic, Report

from .capture import Capture, Instance, needs_data, run_file
from .errors import LiftInputError, Rejected, Unsupported
from .infer import infer_spec
from .instantiate import _MAX_TILE_SHIFT, SM_COUNT_NAME, Elaborated, elaborate_instance
from .spec import Spec, SpecError, parse_spec, spec_from_reference

_REFERENCE = re.compile(r"(?i)^(ref|reference|torch_ref|naive)|_ref(erence)?$|^ref_|_ref_")
_MAX_INSTANCES = 12  # distinct reduced instances per kernel (the file's checking budget bounds the time too)


class _OutOfBudget(BaseException):
    """The file's checking budget (CPU seconds) is spent."""


def main(argv: list[str]) -> int:
    """One request (``{"path": ...}``) or a batch (``{"paths": [...]}``: one process, imports
    paid once, used by the benchmark; each file's failure stays its own).  Answers on the
    private result channel (taken before the user's file runs), one ``frontends.wire`` message
    per file, so a cut-off batch keeps the files it finished."""
    from frontends import wire
    from frontends.sandbox import enter_child, result_channel

    channel = result_channel()
    request = json.loads(open(argv[0], encoding="utf-8").read())
    enter_child(memory_bytes=None)
    if channel is None:
        return 2
    if "paths" not in request:
        wire.write(channel, report_to_json(run_request(request)))
        return 0
    for path in request["paths"]:
        start = time.perf_counter()
        try:
            body = report_to_json(run_request(dict(request, path=path)))
        except Exception as exc:  # noqa: BLE001 - recorded as this file's internal error
            body = {"file": path, "internal_error": f"{type(exc).__name__}: {exc}"[:300],
                    "seconds": time.perf_counter() - start}
        wire.write(channel, body)
    return 0


def run_request(request: dict[str, Any]) -> Report:
    path, wanted = request["path"], request.get("kernel")
    specs: dict[str, str] = request.get("specs") or {}
    start, cpu_start = time.perf_counter(), time.process_time()
    report = Report(file=path, mesh={})
    report.extra["frontend"] = "tilelang"
    source = open(path, encoding="utf-8").read()
    capture = run_file(path, float(request.get("run_budget", 20.0)))
    if not capture.instances and needs_data(capture.stopped_by):
        # the file needs values of tensors made on meta before it asks for a kernel: run it again with them
        # (a run that stops so after its kernels, the usual end of a file's checks, is not run again)
        again = run_file(path, float(request.get("run_budget", 20.0)), real_data=True)
        again.first_run = capture.stopped_by
        capture = again
    report.extra["run"] = capture.ending()
    instances = [i for i in capture.instances if wanted in (None, i.name)]
    if not instances:
        known = sorted({i.name for i in capture.instances})
        reason = (f"no kernel named {wanted} was elaborated (the file elaborated: {', '.join(known)})" if wanted and known
                  else f"running the file elaborated no TileLang kernel (its run ended with {capture.ending()})")
        report.add(Diagnostic("unsupported", ERROR, reason, None))
        report.seconds = time.perf_counter() - start
        report.extra["cpu_seconds"] = round(time.process_time() - cpu_start, 3)
        return report
    references = _references(source)
    by_kernel: dict[str, list[Instance]] = {}
    for instance in instances:
        by_kernel.setdefault(instance.name, []).append(instance)
    report.extra["kernels"] = list(by_kernel)
    budget = float(request.get("check_budget", 120.0))

    spent: list[bool] = []

    def out_of_budget(signum: int, frame: Any) -> None:
        spent.append(True)
        raise _OutOfBudget()

    previous = signal.signal(signal.SIGPROF, out_of_budget)
    # CPU seconds for all checks of the file; once spent, raised again every 0.5 s: an exception
    # raised inside a destructor (Z3's __del__) is swallowed by Python, and the check ran on
    signal.setitimer(signal.ITIMER_PROF, budget, 0.5)
    try:
        for name, group in by_kernel.items():
            try:
                if not spent:
                    _check_kernel(name, group, references, specs, path, report, len(by_kernel), capture)
                    continue
            except _OutOfBudget:
                pass
            except Exception:  # noqa: BLE001 - raised in a C call, ctypes wraps it: the budget is spent all the same
                if not spent:
                    raise
            signal.setitimer(signal.ITIMER_PROF, 0)  # the remaining kernels are refused at once
            report.add(Diagnostic("unsupported", ERROR, f"{name}: not (fully) checked: the file's checking "
                                  f"budget of {budget:.0f} CPU s is spent", group[0].line))
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    report.seconds = time.perf_counter() - start
    report.extra["cpu_seconds"] = round(time.process_time() - cpu_start, 3)
    return report


def _references(source: str) -> dict[str, ast.FunctionDef]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef) and _REFERENCE.search(node.name)}


def _check_kernel(name: str, group: list[Instance], references: dict[str, ast.FunctionDef], specs: dict[str, str],
                  path: str, report: Report, kernel_count: int, capture: Capture) -> None:
    from .tvm_frontend import from_primfunc

    from .source_lines import attach_lines
    source = open(path, encoding="utf-8").read()

    def lift(func: Any, kernel_name: str) -> Any:
        try:
            return attach_lines(from_primfunc(func, kernel_name, path), source, group[0].line)
        except Unsupported:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a TIR form the walker does not know
            raise Unsupported(group[0].line, f"TIR form not modelled by the lifter ({type(exc).__name__}: "
                              f"{str(exc)[:120]})") from None

    done: set[str] = set()
    configs = [i.origin for i in group if i.origin.startswith("autotune")]
    checked: list[str] = []
    for number, instance in enumerate(group):
        if len(done) >= _MAX_INSTANCES:
            report.add(Diagnostic("unsupported", ERROR, f"{name}: {len(group) - number} more size instances / "
                                  f"configs were not checked (at most {_MAX_INSTANCES} per kernel)", instance.line))
            break
        sub = Report(file=path, mesh={})
        try:
            elaborated = elaborate_instance(instance, lift)
        except Unsupported as exc:
            if f"unsupported:{exc.reason}" not in done:
                check = "build" if isinstance(exc, Rejected) else "unsupported"  # a finding about the file
                sub.add(Diagnostic(check, ERROR, f"{name}: {exc.reason}", exc.line or instance.line))
                _merge(report, sub, name)
            done.add(f"unsupported:{exc.reason}")
            continue
        # one check per distinct reduced instance: same reduced tiles, same real values and cases
        key = repr((elaborated.describe(), elaborated.kernel.sizes, [str(b) for _, b in elaborated.divisions],
                    [(str(n), c) for n, c in elaborated.comparisons], _settings(instance)))
        if key in done:
            continue
        done.add(key)
        checked.append(instance.origin)
        _check_elaborated(name, instance, elaborated, references, specs, path, kernel_count, capture, group, sub)
        elaborated, sub = _other_sm_counts(name, instance, elaborated, references, specs, path, kernel_count, capture,
                                           group, sub, lift)
        elaborated, sub = _larger_tiles(name, instance, elaborated, references, specs, path, kernel_count, capture,
                                        group, sub, lift)
        if _equal_tiles_apart(elaborated) and any(d.severity == ERROR and d.check != "unsupported"
                                                  for d in sub.diagnostics):
            sub = _latent_or_real(name, instance, elaborated, references, specs, path, kernel_count, capture, group,
                                  sub, lift)
        _merge(report, sub, name)
    if configs:
        report.add(Diagnostic("autotune", NOTE, f"{name}: {len(configs)} autotune configs recorded; checked "
                              f"{', '.join(c for c in checked if c.startswith('autotune')) or 'none'} (configs with "
                              "the same reduced instance are checked once)", group[0].line))


_NO_THREAD_SYNC = "tl.disable_thread_storage_sync"


def _settings(instance: Instance) -> tuple:
    """The instance's arguments that are no size (a scale, a flag, a dtype): two instances
    differing in one build different kernels, never the same reduced instance."""
    values = list(instance.args) + [value for _, value in instance.kwargs]
    return tuple(repr(v) for v in values if not isinstance(v, int) or isinstance(v, bool))


def _check_elaborated(name: str, instance: Instance, elaborated: Elaborated, references: dict[str, ast.FunctionDef],
                      specs: dict[str, str], path: str, kernel_count: int, capture: Capture, group: list[Instance],
                      sub: Report) -> None:
    """Check one reduced instance against each of its specs, into ``sub``."""
    from .lift import check_lifted
    from .checks import written_buffers
    kernel, paired = elaborated.kernel, bool(elaborated.divisions)
    try:
        kernel = _with_index_samples(kernel, instance, capture)
    except Unsupported as exc:
        sub.add(Diagnostic("unsupported", ERROR, exc.reason, exc.line or instance.line))
        return
    if not paired and kernel.sizes and not elaborated.dynamic:
        # the real tiling case of each division is unknown: check the partial-tile case
        kernel = replace(kernel, sizes=tuple((n, None) for n, _ in kernel.sizes))
    if dict(instance.pass_configs).get(_NO_THREAD_SYNC):
        sub.add(Diagnostic("unsupported", ERROR, f"{name}: built with the pass config {_NO_THREAD_SYNC}: TileLang then "
                           "puts no barrier between the threads' shared-memory accesses, an order the lifter's reading "
                           "of the block's statements assumes", instance.line))
        return
    aliased = _aliased_arguments(instance, capture, [b.name for b in kernel.params], set(written_buffers(kernel)),
                                 kernel.signature)
    if aliased:
        sub.add(Diagnostic("unsupported", ERROR, f"{name}: a launch passes overlapping memory as {aliased}, which the "
                           "kernel writes: in place, a block may read what another block writes, and in-place "
                           "launches are not modelled", instance.line))
        return
    backward_of, forward_too = _backward_launches(instance, capture)
    if backward_of and not _given_spec(name, specs, kernel_count):
        # what it computes there reaches the file's comparisons only through the gradients autograd returns
        sub.add(Diagnostic("unsupported", ERROR, f"{name}: launched in the backward of {backward_of} (by autograd): the "
                           "file compares what it computes there only through the gradients autograd returns, and "
                           "kernels composed along autograd are not checked", instance.line))
        if not forward_too:
            return
    # a reference bound through another instance's launch or profiler is that instance's
    launched = [instance] if capture is not None and (
        any(launch.instance is instance for launch in capture.launches)
        or any(ref.via == "profiler" and ref.instance is instance for ref in capture.references)) else group
    for spec in _spec_for(name, elaborated, references, specs, path, kernel_count, sub, capture, launched):
        if getattr(spec, "traced", False):  # a reference argument named like a tile gets its reduced value
            spec.tile_sizes = {n: (real, reduced) for n, real, reduced in elaborated.tiles + elaborated.fixed}
        try:
            taken = {reduced: real for _, real, reduced in elaborated.tiles + elaborated.fixed}
            check_lifted(kernel, spec, sub, dict(elaborated.divisions), taken, elaborated.dynamic,
                         elaborated.comparisons)
        except Unsupported as exc:
            sub.add(Diagnostic("unsupported", ERROR, exc.reason, exc.line or instance.line))
        _unattributable_spec_differences(instance, spec, sub, {d.split(" = ")[0] for d in elaborated.derived})
    if not paired and not elaborated.dynamic and any(d.check == "out-of-bounds" for d in sub.diagnostics):
        sub.add(Diagnostic("unsupported", ERROR, "correct only when the sizes are multiples of their tiles, and "
                           "whether the real sizes are could not be read from the kernel", instance.line))
    if elaborated.describe():
        sub.proven = [f"{p} (tile/fixed sizes {elaborated.describe()})" for p in sub.proven]


def _aliased_arguments(instance: Instance, capture: Capture | None, params: list[str], written: set[str],
                       signature: tuple[str, ...] = ()) -> str | None:
    """Two parameters of one launch of ``instance``, one of them written by the kernel, given
    tensors whose memory overlaps (``kernel(x, x)``), as "X and Y"; else None."""
    from .reference import launch_tensors
    for launch in (capture.launches if capture is not None else ()):
        if launch.instance is not instance:
            continue
        tensors = list(launch_tensors(launch, params, signature).items()) + \
            [(p, t) for p, t in launch.outputs if p in params]
        for number, (first, a) in enumerate(tensors):
            for second, b in tensors[number + 1:]:
                if first != second and (first in written or second in written) and _overlapping(a, b):
                    return f"{first} and {second}"
    return None


def _overlapping(a: Any, b: Any) -> bool:
    """The two tensors' element ranges in one storage intersect."""
    try:
        if a.untyped_storage()._cdata != b.untyped_storage()._cdata:
            return False
        spans = []
        for t in (a, b):
            start = t.storage_offset() * t.element_size()
            extent = sum((d - 1) * abs(st) for d, st in zip(t.shape, t.stride())) + 1 if t.numel() else 0
            spans.append((start, start + extent * t.element_size()))
        return spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    except (AttributeError, RuntimeError, TypeError):
        return False


def _backward_launches(instance: Instance, capture: Capture | None) -> tuple[str | None, bool]:
    """The autograd node(s) whose backward launched ``instance``, and whether it was launched
    outside a backward too."""
    launches = [launch for launch in (capture.launches if capture is not None else ()) if launch.instance is instance]
    nodes = sorted({launch.backward_of for launch in launches if launch.backward_of})
    return ", ".join(nodes) or None, any(launch.backward_of is None for launch in launches)


def _with_index_samples(kernel: Any, instance: Instance, capture: Capture | None) -> Any:
    """The kernel with a sample plan for each integer tensor it reads as an index, drawn as the file
    drew the tensor it launched the kernel with (``index_inputs``)."""
    from .index_inputs import index_reads, sample_plan
    from .reference import launch_tensors
    if capture is None or not index_reads(kernel):
        return kernel
    names = [b.name for b in kernel.params]
    launches = [launch for launch in capture.launches if launch.instance is instance]
    if not launches:
        raise Unsupported(kernel.line, f"the kernel reads {', '.join(sorted(index_reads(kernel)))} as an index, and "
                          f"{_LAUNCHED_NOWHERE}: what the file passes it is not known{_ended_early(capture)}")
    tensors = launch_tensors(launches[0], names, kernel.signature)
    return replace(kernel, samples=sample_plan(kernel, tensors, capture.derivations))


_OTHER_SM_COUNTS = (3, 5)
_NO_PLAN = ("keeps the kernel's tiling cases", "are still too large to check")


def _sm_count_of(elaborated: Elaborated) -> int | None:
    """The stand-in GPU's SM count the reduced build was made with, when the build asked for it."""
    return next((reduced for n, _, reduced in elaborated.counts if n == SM_COUNT_NAME), None)


def _other_sm_counts(name: str, instance: Instance, elaborated: Elaborated, references: dict[str, ast.FunctionDef],
                     specs: dict[str, str], path: str, kernel_count: int, capture: Capture, group: list[Instance],
                     sub: Report, lift: Any) -> tuple[Elaborated, Report]:
    """A persistent kernel (one block per SM) whose reduced sizes cannot keep its real cases with
    2 SMs (waves of 8-tile groups over 2 SMs never leave a partial wave) is built with 3, then 5:
    any SM count is a GPU the kernel must be right on, and the report names the one checked."""
    for sms in _OTHER_SM_COUNTS:
        if _sm_count_of(elaborated) is None or not any(
                d.check == "unsupported" and any(m in d.message for m in _NO_PLAN) for d in sub.diagnostics):
            break
        try:
            other = elaborate_instance(instance, lift, sms=sms)
        except Unsupported:
            break
        trial = Report(file=path, mesh={})
        _check_elaborated(name, instance, other, references, specs, path, kernel_count, capture, group, trial)
        elaborated, sub = other, trial
    return elaborated, sub


_TOO_LARGE = "are still too large to check"


def _larger_tiles(name: str, instance: Instance, elaborated: Elaborated, references: dict[str, ast.FunctionDef],
                  specs: dict[str, str], path: str, kernel_count: int, capture: Capture, group: list[Instance],
                  sub: Report, lift: Any) -> tuple[Elaborated, Report]:
    """Reduced sizes too large to check because sizes the kernel writes as literals (a group of 128,
    a 64-row tile of its own) keep the problem sizes large while the reduced tiles cut them into
    many blocks: the tiles are raised (4, 8, 16, ... in the order of their real values, never above
    them) while that is so, and the first instance small enough is the one checked."""
    shift = 0
    while any(d.check == "unsupported" and _TOO_LARGE in d.message for d in sub.diagnostics) and \
            any(reduced < real for _, real, reduced in elaborated.tiles) and shift < _MAX_TILE_SHIFT:
        shift += 1
        try:
            other = elaborate_instance(instance, lift, sms=_sm_count_of(elaborated) or 2, shift=shift)
        except Unsupported:
            break
        if other.tiles == elaborated.tiles:
            continue
        if not other.real_built:  # larger tiles may pass where the file's own do not build
            break
        first = next(d.message for d in sub.diagnostics if _TOO_LARGE in d.message)
        raised = ", ".join(f"{n} from {r}" for (n, _, r), (_, _, o) in zip(elaborated.tiles, other.tiles) if o != r)
        other = replace(other, raised=f"tiles raised ({raised}), at the smaller ones the "
                        f"{first.split(': ', 1)[-1].split(' (about')[0]}")
        trial = Report(file=path, mesh={})
        _check_elaborated(name, instance, other, references, specs, path, kernel_count, capture, group, trial)
        elaborated, sub = other, trial
    if shift:
        tiles = ", ".join(f"{n}={r} (real {o})" for n, o, r in elaborated.tiles)
        sub.diagnostics = [replace(d, message=f"{d.message}, with the tiles raised as far as {tiles}")
                           if d.check == "unsupported" and _TOO_LARGE in d.message else d for d in sub.diagnostics]
    return elaborated, sub


def _equal_tiles_apart(elaborated: Elaborated) -> list[tuple[str, int, int]]:
    """Tiles equal in the file's call (block_M = block_N = 64) that the reduction made distinct."""
    apart = [t for t in elaborated.tiles if any(o[1] == t[1] and o[2] != t[2] for o in elaborated.tiles)]
    return apart


def _latent_or_real(name: str, instance: Instance, elaborated: Elaborated, references: dict[str, ast.FunctionDef],
                    specs: dict[str, str], path: str, kernel_count: int, capture: Capture, group: list[Instance],
                    sub: Report, lift: Any) -> Report:
    """A violation found with equal tiles made distinct may be one the file never builds: the
    instance is checked again with those tiles reduced alike (what the file's sizes are).  When
    that is clean, the findings are the factory's general case, said so with the sizes, as
    warnings; the file's own sizes are what is proven."""
    try:
        tied = elaborate_instance(instance, lift, tied=True, sms=_sm_count_of(elaborated) or 2)
    except Unsupported:
        return sub
    again = Report(file=path, mesh={})
    _check_elaborated(name, instance, tied, references, specs, path, kernel_count, capture, group, again)
    if any(d.severity == ERROR for d in again.diagnostics) or not again.proven:
        return sub
    apart = _equal_tiles_apart(elaborated)
    shown = ", ".join(f"{n}={reduced}" for n, _, reduced in apart)
    equal = ", ".join(sorted({f"{' = '.join(n for n, r, _ in apart if r == real)} = {real}" for _, real, _ in apart}))
    for diag in sub.diagnostics:
        if diag.severity == ERROR and diag.check != "unsupported":
            again.add(replace(diag, check="latent", severity=WARNING,
                              message=f"at sizes the file does not build (the factory's general case: {shown}, "
                                      f"where the file builds {equal}): {diag.message}"))
        elif diag.severity != ERROR:
            again.add(diag)
    return again


def _unattributable_spec_differences(instance: Instance, spec: Any, sub: Report,
                                     derived: frozenset[str] | set[str] = frozenset()) -> None:
    """A kernel built with float arguments its reference does not receive (``softmax_scale =
    (dim + pe_dim) ** -0.5`` computed by the file) keeps their real-size values at the reduced
    sizes, while the reference recomputes them from the reduced shapes: a difference from the
    reference may be that alone, so it is not reported as the kernel's (unless the reduction
    recomputed it from the reduced sizes: ``derived``)."""
    given = {repr(a.value) for a in getattr(spec, "arguments", ()) if a.tensor is None}
    names = _parameter_names(instance)
    named = [(names[k] if isinstance(k, int) and k < len(names) else k, v)
             for k, v in list(enumerate(instance.args)) + list(instance.kwargs)]
    floats = [f"{name}={v!r}" for name, v in named
              if isinstance(v, float) and repr(v) not in given and name not in derived]
    why = (f"the kernel is built with float argument(s) {', '.join(floats)} its reference does not receive"
           if floats else "")
    baked = [repr(c) for c in getattr(spec, "constants", ()) if abs(c) not in (0.0, 0.5, 1.0, 2.0, float("inf"))]
    if baked:
        why = f"the file's expected values hold float constant(s) {', '.join(baked)}"
    if getattr(spec, "real_scales", None):
        why = f"its reference is given float argument(s) {', '.join(sorted(spec.real_scales))} of no size it reduces"
    if not why or not getattr(spec, "traced", False):
        return
    for index, diag in enumerate(sub.diagnostics):
        if diag.check == "spec" and diag.severity == ERROR:
            sub.diagnostics[index] = Diagnostic(
                "unsupported", ERROR, f"{diag.message}; but {why}, which may be computed from the real sizes "
                "(reduced here): the difference cannot be attributed to the kernel", diag.line, diag.counterexample)


def _parameter_names(instance: Instance) -> list[str]:
    """The names of the factory's parameters, as ``elaborate_instance`` binds them."""
    if instance.jit is not None:
        return list(instance.jit.signature.parameters)
    return list(inspect.signature(instance.factory).parameters) if instance.factory is not None else []


def _merge(report: Report, sub: Report, name: str) -> None:
    for diag in sub.diagnostics:
        message = diag.message if diag.message.startswith(f"{name}:") else f"{name}: {diag.message}"
        report.add(replace(diag, message=message))
    report.proven.extend(dict.fromkeys(f"{name}: {p}" for p in sub.proven))  # a grid proof per spec: once
    report.ops += sub.ops
    for key, value in sub.extra.items():
        report.extra.setdefault(f"{key}", {})
        if isinstance(report.extra[key], dict):
            report.extra[key][name] = value


def _spec_for(name: str, elaborated: Elaborated, references: dict[str, ast.FunctionDef], specs: dict[str, str],
              path: str, kernel_count: int, report: Report, capture: Capture | None = None,
              group: list[Instance] | None = None) -> list[Spec]:
    """The kernel's own specs: ``--spec NAME=...``, the reference the file calls with the
    kernel's inputs (re-run by torch; each of several the file compares the kernel with), its
    reference function by name, or its tile ops; none (after an unsupported diagnostic) when
    none can be associated."""
    from .checks import written_buffers
    kernel = elaborated.kernel
    names = [b.name for b in kernel.params]
    written = list(written_buffers(kernel))
    inputs = [n for n in names if n not in written]
    text = _given_spec(name, specs, kernel_count)
    if text:
        try:
            return [parse_spec(text, names, path)]
        except LiftInputError as exc:
            report.add(Diagnostic("unsupported", ERROR, f"spec: {exc.message}", kernel.line))
            return []
    traced_reason = ""
    if capture is not None and group:
        from .reference import find_inline_reference, find_reference
        traced, traced_reason = find_reference(group, names, written, capture, path)
        if not traced and not _associate(name, references, kernel_count):
            inline, inline_reason = find_inline_reference(group, names, written, capture, path)
            traced, traced_reason = ([inline] if inline is not None else []), traced_reason or inline_reason
        if traced:
            _bit_pattern_dtypes(traced, kernel)
            return traced
    if traced_reason and capture is not None:
        # what the run did not reach (a reference called after the error) may be the kernel's
        traced_reason += _ended_early(capture)
    reference = _associate(name, references, kernel_count)
    if reference is not None and traced_reason.startswith(f"{reference.name}'s result is compared"):
        # the file's own call of that reference shows it is no spec of this kernel: not translated instead
        report.add(Diagnostic("unsupported", ERROR, f"no spec for kernel {name}: {traced_reason}; pass --spec "
                              f"{name}=\"C = ...\"", kernel.line))
        return []
    if reference is not None:
        params = [a.arg for a in reference.args.args]
        if len(params) != len(inputs):
            passed = _passed_outputs(group or [], names, written, capture)
            in_place = (f" and writes {', '.join(passed)}, which the file passes in (a kernel changing a tensor in "
                        "place, what it leaves keeping the file's values, is not modelled)"
                        if passed and len(params) == len(inputs) + len(passed) else "")
            report.add(Diagnostic("unsupported", ERROR, f"reference {reference.name} takes {len(params)} arguments "
                                  f"({', '.join(params)}) but the kernel reads {len(inputs)} tensors "
                                  f"({', '.join(inputs)}){in_place}; pass --spec {name}=\"...\"", reference.lineno))
            return []
        try:
            return [spec_from_reference(reference, inputs, written, path)]
        except (LiftInputError, SpecError) as exc:
            reason = exc.message if isinstance(exc, LiftInputError) else str(exc)
            func = capture.namespace.get(reference.name) if capture is not None and group else None
            # one the file never calls: how the file binds it is then not shown by the run
            if func is not None and not traced_reason and not any(r.func is func for r in capture.references):
                from .reference import named_reference
                traced = named_reference(func, inputs, written, group, names, capture, path,
                                         {b.name: b.dtype for b in kernel.params})
                if traced is not None:
                    return [traced]
            report.add(Diagnostic("unsupported", ERROR, f"reference {reference.name} is not translatable ({reason}); "
                                  f"pass --spec {name}=\"...\"", reference.lineno))
            return []
    if traced_reason:  # the file checks this kernel against something that cannot be its spec: not guessed
        report.add(Diagnostic("unsupported", ERROR, f"no spec for kernel {name}: {traced_reason}; pass --spec "
                              f"{name}=\"C = ...\"", kernel.line))
        return []
    inferred = infer_spec(kernel)
    if inferred:
        try:
            return [replace(parse_spec(inferred, names, path), origin="inferred from the tile ops")]
        except LiftInputError:
            pass
    others = f" (the file's references {', '.join(references)} cannot be associated with it)" if references else ""
    if capture is not None and group:
        from .reference import _among, references_of_other_tensors
        called = references_of_other_tensors(group, names, written, capture)
        if called:
            others += (f"; the file compares its outputs with what {', '.join(called)} "
                       f"return{'s' if len(called) == 1 else ''}, called with tensors other than the kernel's "
                       "inputs or unchanged copies of them (a reference of several kernels together, or of inputs "
                       "made otherwise)")
        if not any(_among(launch.instance, group) for launch in capture.launches) and \
                not any(ref.via == "profiler" and _among(ref.instance, group) for ref in capture.references):
            others += f"; {_LAUNCHED_NOWHERE}"
        others += _ended_early(capture)
    report.add(Diagnostic("unsupported", ERROR, f"no spec for kernel {name}{others}: pass --spec {name}=\"C = ...\"",
                          kernel.line))
    return []


_LAUNCHED_NOWHERE = "the file's run launches it nowhere (a launch inside a function only benchmarked is not run)"


def _ended_early(capture: Capture) -> str:
    """``; the file's run ended before its end, with ...`` when it did, else nothing."""
    if capture.stopped_by and capture.stopped_by != "end of file":
        return f"; the file's run ended before its end, with {capture.ending()}"
    return ""


def _passed_outputs(group: list[Instance], names: list[str], written: list[str], capture: Capture | None) -> list[str]:
    """The buffers the kernel writes that a launch of it passes in (no ``out_idx`` outputs)."""
    if capture is None:
        return []
    from .reference import _among, launch_tensors
    return [w for w in written if any(_among(launch.instance, group) and w in launch_tensors(launch, names)
                                      for launch in capture.launches)]


def _bit_pattern_dtypes(specs: list[Spec], kernel: Any) -> None:
    """A tensor the kernel reads as bits is given to the reference in the kernel's dtype (its
    sample's values as the file's ``uint8``), when the run did not show the file's tensor."""
    import torch

    from .counterexample import bit_patterns
    for spec in specs:
        for name in bit_patterns(kernel):
            if name in spec.inputs and name not in spec.dtypes:
                spec.dtypes[name] = getattr(torch, kernel.buffer(name).dtype)


def _given_spec(name: str, specs: dict[str, str], kernel_count: int) -> str | None:
    """The user's ``--spec`` for this kernel (``NAME=...``, or an unnamed one in a one-kernel file)."""
    return specs.get(name) or (specs.get("") if kernel_count == 1 else None)


def _associate(name: str, references: dict[str, ast.FunctionDef], kernel_count: int) -> ast.FunctionDef | None:
    matching = [f for n, f in references.items() if name.lower() in n.lower()]
    if len(matching) == 1:
        return matching[0]
    if kernel_count == 1 and len(references) == 1:
        return next(iter(references.values()))
    return None


def report_to_json(report: Report) -> dict[str, Any]:
    body = report.to_json()
    body["seconds"] = report.seconds
    return body


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
