"""``verify-agent lift KERNEL.py``: lift a kernel, pick its spec, reduce sizes, check.

The pipeline, one way: source -> frontend (``text_frontend`` or ``tvm_frontend``) ->
:class:`Kernel` -> spec (``--spec``, a reference function, or inferred) -> reduced sizes
(``sizes.plan``) -> checks (``checks``; ``distributed`` with ``--mesh``) -> ``Report``.
"""
from __future__ import annotations

import functools
import re
import time
from dataclasses import replace
from typing import Callable

from verifier.report import ERROR, NOTE, WARNING, Diagnostic, Report

from .checks import check_kernel, written_buffers
from .distributed import check_distributed, parse_mesh, parse_shards
from .errors import LiftInputError, Unsupported
from .infer import infer_spec
from .program import Kernel, LiftResult, count_ops
from .sizes import concrete_cost, describe_cost, plan
from .spec import Spec, parse_spec, spec_from_reference
from .text_frontend import lift_source

_MAX_COST = 2_000_000


def run_lift(path: str, kernel: str | None = None, spec: str | list[str] | None = None, mesh: str | None = None,
             shards: list[str] | None = None, frontend: str = "auto", no_exec: bool = False,
             timeout: float | None = None) -> Report:
    """Lift ``path`` and check it; raise :class:`LiftInputError` on bad input.

    ``frontend``: ``"auto"`` runs the file in a child process where TileLang elaborates
    every kernel it asks for (``elaborate_run``; needs ``tilelang``, off with ``no_exec``
    or with ``--mesh``) and otherwise reads the source text; ``"text"`` reads the source
    with ``ast``; ``"tvm"`` builds the text reading's factories with TileLang at the
    reduced sizes and reports where it differs from the source reading.  ``spec``: one
    spec, or ``KERNEL=spec`` items (one per kernel).
    """
    start = time.perf_counter()
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
    except OSError as exc:
        raise LiftInputError(f"expected a readable kernel file ({exc.strerror})", path, 0) from None
    specs = kernel_specs(spec)
    if frontend == "auto" and not no_exec and not mesh and _tilelang_installed() and _looks_like_python(source):
        from .elaborate_run import run_elaboration
        return run_elaboration(path, kernel, specs, timeout=timeout or 600.0)
    mesh_dims = parse_mesh(mesh, path)
    report = Report(file=path, mesh=dict(mesh_dims))
    try:
        lifted = lift_source(source, path, kernel)
    except LiftInputError as exc:
        if exc.message.startswith(("expected valid Python", "expected a @T.prim_func", "expected --kernel")):
            raise
        report.add(Diagnostic("unsupported", ERROR, f"the source reader does not model this: {exc.message}",
                              exc.line))
        report.seconds = time.perf_counter() - start
        return report
    for text_kernel in lifted.kernels:
        sub = Report(file=path, mesh=dict(mesh_dims))
        one_spec = specs.get(text_kernel.name) or (specs.get("") if len(lifted.kernels) == 1 else None)
        _lift_one(text_kernel, lifted, one_spec, path, sub, frontend, mesh_dims, shards)
        _merge_kernel(report, sub, text_kernel.name, len(lifted.kernels) > 1)
    report.seconds = time.perf_counter() - start
    return report


def kernel_specs(spec: str | list[str] | None) -> dict[str, str]:
    """``["matmul=C = A @ B", "D = A + B"]`` -> ``{"matmul": "C = A @ B", "": "D = A + B"}``."""
    items = [spec] if isinstance(spec, str) else list(spec or [])
    out: dict[str, str] = {}
    for item in items:
        named = re.match(r"^\s*([A-Za-z_]\w*)\s*=(?!=)(.*=.*)$", item, re.S)
        if named:
            out[named.group(1)] = named.group(2).strip().strip("'\"")
        else:
            out[""] = item
    return out


def _looks_like_python(source: str) -> bool:
    return "import tilelang" in source or "from tilelang" in source


def _merge_kernel(report: Report, sub: Report, name: str, prefix: bool) -> None:
    for diag in sub.diagnostics:
        report.add(replace(diag, message=f"{name}: {diag.message}") if prefix else diag)
    report.proven.extend(f"{name}: {p}" if prefix else p for p in sub.proven)
    report.ops += sub.ops
    if not prefix:
        report.extra.update(sub.extra)
    else:
        report.extra.setdefault("kernels", []).append(name)
        for key, value in sub.extra.items():
            report.extra.setdefault(key + "_by_kernel", {})[name] = value


def _lift_one(text_kernel: Kernel, lifted: LiftResult, spec: str | None, path: str, report: Report, frontend: str,
              mesh_dims: tuple[tuple[str, int], ...], shards: list[str] | None) -> None:
    placements = parse_shards(shards or [], [b.name for b in text_kernel.params], path)
    report.ops = count_ops(text_kernel)
    report.extra["kernel"] = text_kernel.name
    use_tvm = frontend == "tvm" or (frontend == "auto" and bool(lifted.unsupported) and _tvm_available())
    if lifted.unsupported and not use_tvm:
        for line, reason in lifted.unsupported:
            report.add(Diagnostic("unsupported", ERROR, reason, line))
        return
    report.extra["frontend"] = "tvm" if use_tvm else "text"
    resolved = _resolve_spec(text_kernel, lifted, spec, path, report)
    build = _tvm_builder(path, text_kernel, lifted, report) if use_tvm else (lambda sizes: text_kernel)
    try:
        _check(text_kernel, build, resolved, report, mesh_dims, placements)
    except Unsupported as exc:
        report.add(Diagnostic("unsupported", ERROR, exc.reason, exc.line or text_kernel.line))


@functools.lru_cache(maxsize=64)
def _bounds_guard_on(path: str) -> bool:
    """False when the file turns TileLang's bounds guard off (``tl.disable_safe_memory_legalize``
    in a pass config): its global accesses past an edge are then faults, as compiled."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return True
    return "disable_safe_memory_legalize" not in text and "TL_DISABLE_SAFE_MEMORY_ACCESS" not in text


def _without_guard(build: Callable[[dict], Kernel]) -> Callable[[dict], Kernel]:
    return lambda sizes: replace(build(sizes), auto_guard=False)


def _tilelang_installed() -> bool:
    """Cheap test (no import: importing TileLang takes seconds; the child imports it)."""
    import importlib.util
    return importlib.util.find_spec("tilelang") is not None


def _tvm_available() -> bool:
    from .tvm_frontend import available
    return available()


def _tvm_builder(path: str, text_kernel: Kernel, lifted: LiftResult, report: Report) -> Callable[[dict], Kernel]:
    """Build the kernel with TileLang at the requested sizes; compare with the source reading."""
    from .compare import difference, normalize
    from .tvm_frontend import lift_module

    def build(sizes: dict[str, int]) -> Kernel:
        result = lift_module(path, text_kernel.name, sizes)
        if result.unsupported:
            line, reason = result.unsupported[0]
            raise Unsupported(line, f"TileLang PrimFunc: {reason}")
        built = result.kernels[0]
        if not lifted.unsupported:
            diff = difference(normalize(text_kernel, sizes), normalize(built, {}))
            if diff and not any(d.check == "frontend-mismatch" for d in report.diagnostics):
                report.add(Diagnostic("frontend-mismatch", WARNING, f"TileLang's PrimFunc differs from the source "
                                      f"reading: {diff}", text_kernel.line))
        return built
    return build


def _resolve_spec(kernel: Kernel, lifted: LiftResult, text: str | None, path: str, report: Report) -> Spec | None:
    names = [b.name for b in kernel.params]
    written = list(written_buffers(kernel))
    inputs = [n for n in names if n not in written]
    if text:
        return parse_spec(text, names, path)
    own = [f for n, f in lifted.references.items() if kernel.name.lower() in n.lower()]
    if len(own) != 1 and len(lifted.kernels) == 1 and len(lifted.references) == 1:
        own = list(lifted.references.values())
    if len(own) == 1:  # a reference belongs to a kernel by name, or as the file's only one
        try:
            return spec_from_reference(own[0], inputs, written, path)
        except LiftInputError as exc:
            report.add(Diagnostic("unsupported", ERROR, f"reference {own[0].name} is not translatable "
                                  f"({exc.message}); pass --spec", own[0].lineno))
            return None
    inferred = infer_spec(kernel)
    if inferred:
        return replace(parse_spec(inferred, names, path), origin="inferred from the tile ops")
    report.add(Diagnostic("unsupported", ERROR, "no spec: pass --spec 'C = A @ B' or define ref_program(...) in "
                          "the file (the kernel's tile ops match no gemm, reduction or element-wise idiom)",
                          kernel.line))
    return None


def check_lifted(kernel: Kernel, spec: Spec | None, report: Report, real_divisions: dict | None = None,
                 taken: dict[int, int] | None = None, dynamic: tuple[str, ...] = (),
                 comparisons: tuple = ()) -> None:
    """Check a kernel lifted from a PrimFunc TileLang built (tile sizes already reduced;
    ``taken``: their reduced -> real values, kept apart from the sizes chosen here).

    ``comparisons``: comparisons of constants with sizes and the case (below, at, above the
    constant) each has at the real sizes, kept by the reduced sizes.

    ``dynamic`` sizes are read by the kernel at run time (``T.dynamic``): any value may come,
    so both tiling cases are checked (a partial last tile, and exact multiples of the tile)
    and a fault in either is a violation."""
    report.ops = count_ops(kernel)
    if not dynamic:
        _check(kernel, lambda sizes: kernel, spec, report, (), {}, real_divisions, taken, comparisons=comparisons)
        return
    for divisible in (False, True):
        case = Report(file=report.file, mesh={})
        _check(kernel, lambda sizes: kernel, spec, case, (), {}, real_divisions, taken, strict=True, divisible=divisible,
               comparisons=comparisons)
        label = "exact multiples of their tiles" if divisible else "a partial last tile"
        for diag in case.diagnostics:
            if not any(d.check == diag.check and d.message == diag.message for d in report.diagnostics):
                report.add(diag)
        report.proven.extend(f"{p} (run-time sizes {', '.join(dynamic)}: {label})" for p in case.proven)
        report.extra.setdefault("reduced_sizes_by_case", []).append(case.extra.get("reduced_sizes"))
        for key in ("spec", "spec_origin"):
            if key in case.extra:
                report.extra[key] = case.extra[key]


def _check(kernel: Kernel, build: Callable[[dict], Kernel], spec: Spec | None, report: Report,
           mesh_dims: tuple[tuple[str, int], ...], placements: dict, real_divisions: dict | None = None,
           taken: dict[int, int] | None = None, strict: bool = False, divisible: bool = False,
           comparisons: tuple = ()) -> None:
    """``kernel`` is the source reading (sizes symbolic); ``build(sizes)`` gives the kernel
    to run at those sizes (the same one, or TileLang's PrimFunc built at them)."""
    unbound = [name for name, value in kernel.sizes if value is None]
    reduction = plan(kernel, assume_divisible=divisible, real_divisions=real_divisions, taken=taken,
                     comparisons=comparisons)
    if concrete_cost(kernel, reduction.sizes) > _MAX_COST:
        if not reduction.sizes:
            raise Unsupported(kernel.line, "the kernel has only literal sizes, too large to check and with no named "
                              "size to reduce; write it as a factory over named sizes (def matmul(M, N, K, block_M, "
                              "...)) or print it at small sizes")
        raise Unsupported(kernel.line, f"reduced sizes {reduction.describe()} are still too large to check "
                          f"({describe_cost(kernel, reduction.sizes)}; the limit is {_MAX_COST:,})")
    if not _bounds_guard_on(report.file):
        build = _without_guard(build)
    result = check_kernel(build(reduction.sizes), spec, reduction)
    out_of_bounds = [d for d in result.diagnostics if d.check == "out-of-bounds"]
    if unbound and out_of_bounds and not strict and not divisible:
        divisible = plan(kernel, assume_divisible=True, real_divisions=real_divisions, taken=taken,
                         comparisons=comparisons)
        retry = check_kernel(build(divisible.sizes), spec, divisible)
        if not any(d.check == "out-of-bounds" for d in retry.diagnostics):
            for diag in out_of_bounds:
                report.add(Diagnostic("out-of-bounds", WARNING, f"{diag.message}; checked assuming sizes "
                                      f"{', '.join(unbound)} are multiples of their tiles", diag.line,
                                      diag.counterexample))
            reduction, result = divisible, retry
    for diag in result.diagnostics:
        report.add(diag)
    report.proven.extend(result.proven)
    report.extra["reduced_sizes"] = reduction.sizes
    if spec is not None:
        report.extra["spec"] = spec.text
        report.extra["spec_origin"] = spec.origin
    if mesh_dims:
        if spec is None:
            report.add(Diagnostic("unsupported", ERROR, "distributed lifting needs a spec", kernel.line))
            return
        dist = check_distributed(kernel, spec, mesh_dims, placements)
        for diag in dist.diagnostics:
            report.add(diag)
        report.proven.extend(dist.proven)
        if dist.program_text:
            report.extra["derived_program"] = dist.program_text
            report.add(Diagnostic("derived-program", NOTE, dist.summary, kernel.grid_line or kernel.line))
