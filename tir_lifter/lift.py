"""``verify-agent lift KERNEL.py``: lift a kernel, pick its spec, reduce sizes, check.

The pipeline, one way: source -> frontend (``text_frontend`` or ``tvm_frontend``) ->
:class:`Kernel` -> spec (``--spec``, a reference function, or inferred) -> reduced sizes
(``sizes.plan``) -> checks (``checks``; ``distributed`` with ``--mesh``) -> ``Report``.
"""
from __future__ import annotations

import time
from dataclasses import replace

from verifier.report import ERROR, NOTE, WARNING, Diagnostic, Report

from .checks import check_kernel, written_buffers
from .distributed import check_distributed, parse_mesh, parse_shards
from .errors import LiftInputError, Unsupported
from .infer import infer_spec
from .program import Kernel, LiftResult, count_ops
from .sizes import concrete_cost, plan
from .spec import Spec, parse_spec, spec_from_reference
from .text_frontend import lift_source

_MAX_COST = 2_000_000


def run_lift(path: str, kernel: str | None = None, spec: str | None = None, mesh: str | None = None,
             shards: list[str] | None = None, frontend: str = "auto") -> Report:
    """Lift ``path`` and check it; raise :class:`LiftInputError` on bad input.

    ``frontend``: ``"text"`` reads the source with ``ast``; ``"tvm"`` imports the file and
    walks TileLang's own PrimFuncs (needs ``tilelang``); ``"auto"`` uses the text reader
    and falls back to TileLang when the text reader meets a construct it does not know
    and TileLang is installed.
    """
    start = time.perf_counter()
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
    except OSError as exc:
        raise LiftInputError(f"expected a readable kernel file ({exc.strerror})", path, 0) from None
    mesh_dims = parse_mesh(mesh, path)
    report = Report(file=path, mesh=dict(mesh_dims))
    lifted = _lift(source, path, kernel, frontend)
    if len(lifted.kernels) > 1:
        names = ", ".join(k.name for k in lifted.kernels)
        raise LiftInputError(f"expected --kernel NAME: the file defines several kernels ({names})", path,
                             lifted.kernels[1].line)
    lifted_kernel = lifted.kernels[0]
    placements = parse_shards(shards or [], [b.name for b in lifted_kernel.params], path)
    report.ops = count_ops(lifted_kernel)
    report.extra["kernel"] = lifted_kernel.name
    if lifted.unsupported:
        for line, reason in lifted.unsupported:
            report.add(Diagnostic("unsupported", ERROR, reason, line))
        report.seconds = time.perf_counter() - start
        return report
    resolved = _resolve_spec(lifted_kernel, lifted, spec, path, report)
    try:
        _check(lifted_kernel, resolved, report, mesh_dims, placements)
    except Unsupported as exc:
        report.add(Diagnostic("unsupported", ERROR, exc.reason, exc.line or lifted_kernel.line))
    report.seconds = time.perf_counter() - start
    return report


def _lift(source: str, path: str, kernel: str | None, frontend: str) -> LiftResult:
    if frontend == "tvm":
        from .tvm_frontend import lift_module
        return lift_module(path, kernel)
    result = lift_source(source, path, kernel)
    if frontend == "auto" and result.unsupported:
        try:
            from .tvm_frontend import available, lift_module
        except ImportError:
            return result
        if available():
            fallback = lift_module(path, kernel)
            if fallback.kernels and not fallback.unsupported:
                fallback.references = result.references
                return fallback
    return result


def _resolve_spec(kernel: Kernel, lifted: LiftResult, text: str | None, path: str, report: Report) -> Spec | None:
    names = [b.name for b in kernel.params]
    written = list(written_buffers(kernel))
    inputs = [n for n in names if n not in written]
    if text:
        return parse_spec(text, names, path)
    for func in lifted.references.values():
        spec = spec_from_reference(func, inputs, written, path)
        return spec
    inferred = infer_spec(kernel)
    if inferred:
        return replace(parse_spec(inferred, names, path), origin="inferred from the tile ops")
    report.add(Diagnostic("unsupported", ERROR, "no spec: pass --spec 'C = A @ B' or define ref_program(...) in "
                          "the file (the kernel's tile ops match no gemm, reduction or element-wise idiom)",
                          kernel.line))
    return None


def _check(kernel: Kernel, spec: Spec | None, report: Report, mesh_dims: tuple[tuple[str, int], ...],
           placements: dict) -> None:
    unbound = [name for name, value in kernel.sizes if value is None]
    reduction = plan(kernel)
    if concrete_cost(kernel, reduction.sizes) > _MAX_COST:
        raise Unsupported(kernel.line, f"reduced sizes {reduction.describe()} are still too large to check")
    result = check_kernel(kernel, spec, reduction)
    out_of_bounds = [d for d in result.diagnostics if d.check == "out-of-bounds"]
    if unbound and out_of_bounds:
        divisible = plan(kernel, assume_divisible=True)
        retry = check_kernel(kernel, spec, divisible)
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
