"""``verify-agent lift KERNEL.py``: lift a kernel, pick its spec, reduce sizes, check.

The pipeline, one way: source -> frontend (``text_frontend`` or ``tvm_frontend``) ->
:class:`Kernel` -> spec (``--spec``, a reference function, or inferred) -> reduced sizes
(``sizes.plan``) -> checks (``checks``; ``distributed`` with ``--mesh``) -> ``Report``.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

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
    walks the PrimFunc TileLang builds at the reduced sizes (needs ``tilelang``), and
    reports where it differs from the source reading; ``"auto"`` uses the text reader and
    falls back to TileLang when the text reader meets a construct it does not know and
    TileLang is installed.  Distributed checks always run on the source reading.
    """
    start = time.perf_counter()
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
    except OSError as exc:
        raise LiftInputError(f"expected a readable kernel file ({exc.strerror})", path, 0) from None
    mesh_dims = parse_mesh(mesh, path)
    report = Report(file=path, mesh=dict(mesh_dims))
    lifted = lift_source(source, path, kernel)
    if len(lifted.kernels) > 1:
        names = ", ".join(k.name for k in lifted.kernels)
        raise LiftInputError(f"expected --kernel NAME: the file defines several kernels ({names})", path,
                             lifted.kernels[1].line)
    text_kernel = lifted.kernels[0]
    placements = parse_shards(shards or [], [b.name for b in text_kernel.params], path)
    report.ops = count_ops(text_kernel)
    report.extra["kernel"] = text_kernel.name
    use_tvm = frontend == "tvm" or (frontend == "auto" and bool(lifted.unsupported) and _tvm_available())
    if lifted.unsupported and not use_tvm:
        for line, reason in lifted.unsupported:
            report.add(Diagnostic("unsupported", ERROR, reason, line))
        report.seconds = time.perf_counter() - start
        return report
    report.extra["frontend"] = "tvm" if use_tvm else "text"
    resolved = _resolve_spec(text_kernel, lifted, spec, path, report)
    build = _tvm_builder(path, text_kernel, lifted, report) if use_tvm else (lambda sizes: text_kernel)
    try:
        _check(text_kernel, build, resolved, report, mesh_dims, placements)
    except Unsupported as exc:
        report.add(Diagnostic("unsupported", ERROR, exc.reason, exc.line or text_kernel.line))
    report.seconds = time.perf_counter() - start
    return report


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


def _check(kernel: Kernel, build: Callable[[dict], Kernel], spec: Spec | None, report: Report,
           mesh_dims: tuple[tuple[str, int], ...], placements: dict) -> None:
    """``kernel`` is the source reading (sizes symbolic); ``build(sizes)`` gives the kernel
    to run at those sizes (the same one, or TileLang's PrimFunc built at them)."""
    unbound = [name for name, value in kernel.sizes if value is None]
    reduction = plan(kernel)
    if concrete_cost(kernel, reduction.sizes) > _MAX_COST:
        if not reduction.sizes:
            raise Unsupported(kernel.line, "the kernel has only literal sizes, too large to check and with no named "
                              "size to reduce; write it as a factory over named sizes (def matmul(M, N, K, block_M, "
                              "...)) or print it at small sizes")
        raise Unsupported(kernel.line, f"reduced sizes {reduction.describe()} are still too large to check")
    result = check_kernel(build(reduction.sizes), spec, reduction)
    out_of_bounds = [d for d in result.diagnostics if d.check == "out-of-bounds"]
    if unbound and out_of_bounds:
        divisible = plan(kernel, assume_divisible=True)
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
