"""Concrete witnesses: inputs a user can paste, re-checked by running the lifted kernel on floats.

Z3 works with exact reals and uninterpreted functions; a witness is only reported as a
violation after the float interpreter reproduces it on the same lifted kernel, so what the
user sees is an ordinary run, not a solver artefact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from verifier.report import Counterexample

from .backends import FloatBackend
from .bits import BIT_OPERATIONS, REINTERPRET, int_range, is_integer_dtype, torch_dtype, width
from .interpreter import Machine
from .program import (BinOp, Call, Const, If, Kernel, Load, Loop, Region, Store, TileOp, While, expr_children,
                      walk_expr, walk_stmts)
from .size_env import eval_size
from .spec import Spec, SpecError, evaluate

_TOLERANCE = 1e-6
# with exp/log in the kernel, float32 constants (log2 e folded into a scale) move results by
# more than 1e-6 on inputs of a few units; a real bug moves them by far more than 1e-3
_TRANSCENDENTAL_TOLERANCE = 1e-3
_TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid"}


def tolerance(kernel: Kernel) -> float:
    for stmt in walk_stmts(kernel.body):
        exprs = [stmt.value] if isinstance(stmt, Store) else \
            [o for o in stmt.operands if not isinstance(o, Region)] if isinstance(stmt, TileOp) else []
        for expr in exprs:
            if any(isinstance(e, Call) and e.fn in _TRANSCENDENTAL for e in walk_expr(expr)):
                return _TRANSCENDENTAL_TOLERANCE
    return _TOLERANCE


@dataclass
class Witness:
    cell: tuple[str, tuple[int, ...]]
    got: float
    want: float
    line: int | None
    counterexample: Counterexample
    through: tuple[int, ...] = ()  # every source line the wrong value came through, in order


def fmt(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.6g}"


def describe_block(kernel: Kernel, block: tuple[int, ...]) -> str:
    return "(" + ", ".join(f"{axis.var}={value}" for axis, value in zip(kernel.grid or kernel.all_axes, block)) + ")"


def random_inputs(kernel: Kernel, sizes: dict[str, int], seed: int,
                  shapes: dict[str, tuple[int, ...]] | None = None, fractions: bool = False) -> dict[str, np.ndarray]:
    """Small integers (exact in floats) for every global tensor, or with ``fractions`` values in
    [-4, 4] on a grid of 2^-12 (exact in float32, not in float16: they show roundings); atomically
    accumulated outputs start at zero, as the kernel's caller must provide."""
    from verifier.rules.casts import float_format, round_value

    from .checks import written_buffers
    rng = np.random.default_rng(seed)
    written = written_buffers(kernel)
    masks = mask_values(kernel, sizes, shapes)
    out: dict[str, np.ndarray] = {}
    for buf in kernel.params:
        shape = (shapes or {}).get(buf.name) or tuple(eval_size(d, sizes) for d in buf.shape)
        if buf.name in masks:
            out[buf.name] = masks[buf.name]
        elif written.get(buf.name) is True:
            out[buf.name] = np.zeros(shape)
        elif fractions:  # representable in the tensor's own dtype
            values = np.round(rng.uniform(-4, 4, size=shape) * 4096) / 4096
            fmt = float_format(buf.dtype)
            out[buf.name] = values if fmt is None else np.vectorize(lambda v: round_value(v, fmt))(values)
        else:
            out[buf.name] = rng.integers(-3, 4, size=shape).astype(float)
    return out


def mask_values(kernel: Kernel, sizes: dict[str, int], shapes: dict[str, tuple[int, ...]] | None = None
                ) -> dict[str, np.ndarray]:
    """The one sampled value of each boolean input tensor (a block mask), or 8-bit integer one
    the kernel only compares with constants (``mask[j] != 0``): a kernel branches on it, so it
    is not a symbolic input.  The same sample for the proof, the reference and every
    concrete run; some elements true and some false."""
    from .checks import written_buffers
    written = written_buffers(kernel)
    out: dict[str, np.ndarray] = {}
    patterns = bit_patterns(kernel)
    for buf in kernel.params:
        if buf.name in patterns:
            shape = (shapes or {}).get(buf.name) or tuple(eval_size(d, sizes) for d in buf.shape)
            lo, hi = int_range(buf.dtype)
            out[buf.name] = np.random.default_rng(len(out) + 11).integers(lo, hi, size=shape, endpoint=True)
            continue
        if buf.name in written or not (buf.dtype == "bool" or buf.dtype in _INTEGER_MASKS and _only_compared(kernel,
                                                                                                           buf.name)):
            continue
        shape = (shapes or {}).get(buf.name) or tuple(eval_size(d, sizes) for d in buf.shape)
        values = np.random.default_rng(len(out) + 7).random(shape) < 0.5
        if values.size >= 2:
            values.flat[0], values.flat[-1] = True, False
        out[buf.name] = values
    if kernel.samples:  # integer index tensors: one sample drawn as the file draws them
        from .index_inputs import sampled_values
        every = {b.name: (shapes or {}).get(b.name) or tuple(eval_size(d, sizes) for d in b.shape) for b in kernel.params}
        out.update(sampled_values(kernel, every))
    return out


_INTEGER_MASKS = ("uint8", "int8")


def _copies(kernel: Kernel, name: str) -> set[str]:
    """Tensor ``name`` and the on-chip buffers the kernel copies it into (copies of copies too)."""
    names = {name}
    for stmt in walk_stmts(kernel.body):  # statements come in program order: copies before uses
        if isinstance(stmt, TileOp) and stmt.kind == "copy" and stmt.operands[0].buffer in names:
            names.add(stmt.operands[1].buffer)
    return names


def bit_patterns(kernel: Kernel) -> list[str]:
    """The integer input tensors (32 bits wide at most) a bit operation reads: sampled."""
    from .checks import written_buffers
    written = written_buffers(kernel)
    return [b.name for b in kernel.params if b.name not in written and is_integer_dtype(b.dtype)
            and width(b.dtype) <= 32 and _bit_read(kernel, b.name)]


def _bit_read(kernel: Kernel, name: str) -> bool:
    """Some bit operation or reinterpret of the kernel reads an element of tensor ``name`` (or of a
    copy of it): its elements are bit patterns, run as one sample of integers."""
    names = _copies(kernel, name)
    for stmt in walk_stmts(kernel.body):
        exprs = [stmt.value] if isinstance(stmt, Store) else \
            [o for o in stmt.operands if not isinstance(o, Region)] if isinstance(stmt, TileOp) else []
        for expr in exprs:
            for node in walk_expr(expr):
                if isinstance(node, Call) and node.fn in (*BIT_OPERATIONS, REINTERPRET) and \
                        any(isinstance(e, Load) and e.buffer in names for e in walk_expr(node)):
                    return True
    return False


_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def _only_compared(kernel: Kernel, name: str) -> bool:
    """Every read of tensor ``name``, and of the on-chip copies made of it, compares one
    element with a constant: never arithmetic, an index or a tile op's operand."""
    names = _copies(kernel, name)
    exprs: list[Any] = []
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, TileOp):
            regions = [o for o in stmt.operands if isinstance(o, Region)]
            if stmt.kind != "copy" and any(r.buffer in names for r in regions):
                return False
            exprs += [o for o in stmt.operands if not isinstance(o, Region)]
            exprs += [e for r in regions for e in r.starts + (r.extents or ())]
        elif isinstance(stmt, Store):
            if stmt.buffer in names:
                return False
            exprs += list(stmt.indices) + [stmt.value]
        elif isinstance(stmt, (If, While)):
            exprs.append(stmt.cond)
        elif isinstance(stmt, Loop):
            exprs.append(stmt.extent)
    return all(_compared_reads(e, names) for e in exprs)


def _compared_reads(expr: Any, names: set[str]) -> bool:
    if isinstance(expr, Load) and expr.buffer in names:
        return False  # read for its value
    if isinstance(expr, BinOp) and expr.op in _COMPARISONS:
        for read, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(read, Call) and read.fn == "cast" and len(read.args) == 1:  # (int32) mask[j] != 0
                read = read.args[0]
            if isinstance(read, Load) and read.buffer in names:
                return isinstance(other, Const) and all(_compared_reads(i, names) for i in read.indices)
    return all(_compared_reads(c, names) for c in expr_children(expr))


def is_mask(values: Any) -> bool:
    """A sampled input's values (a mask's booleans, an index tensor's integers), not numbers or terms."""
    array = np.asarray(values)
    return array.dtype == bool or array.dtype.kind in "iu" or (
        array.size > 0 and all(isinstance(v, (bool, np.bool_, int, np.integer)) for v in array.flat))


def is_bool_mask(values: Any) -> bool:
    array = np.asarray(values)
    return array.dtype == bool or (array.size > 0 and all(isinstance(v, (bool, np.bool_)) for v in array.flat))


def sampled_array(values: Any) -> np.ndarray:
    """A sampled input as NumPy values of its kind (booleans or integers)."""
    return np.asarray(values, dtype=bool) if is_bool_mask(values) else np.asarray(values, dtype=np.int64)


def describe_masks(masks: dict[str, np.ndarray], kernel: Kernel | None = None) -> str:
    from .index_inputs import describe_samples
    bools = [f"{name} (bool) fixed to one sampled value ({int(v.sum())} of {v.size} true), other values not proven"
             for name, v in masks.items() if is_bool_mask(v)]
    indexed = {s.name for s in kernel.samples} if kernel is not None else set()
    patterns = [f"{name} ({kernel.buffer(name).dtype}, read as bits) fixed to one sampled value (each element drawn "
                f"from {'..'.join(map(str, int_range(kernel.buffer(name).dtype)))}), other values not proven"
                for name, v in masks.items() if kernel is not None and not is_bool_mask(v) and name not in indexed]
    return "; ".join(bools + patterns + (describe_samples(kernel, set(masks)) if kernel is not None else []))


def _objects(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: sampled_array(array).astype(object) if is_mask(array)
            else np.asarray(array, dtype=float).astype(object) for name, array in arrays.items()}


def run_float(kernel: Kernel, sizes: dict[str, int], inputs: dict[str, np.ndarray]):
    return Machine(kernel, sizes, FloatBackend(), _objects(inputs), record_origins=True).run()


def _close(a: Any, b: Any, tol: float = _TOLERANCE) -> bool:
    a, b = float(a), float(b)
    if np.isnan(a) or np.isnan(b):
        return np.isnan(a) and np.isnan(b)
    return abs(a - b) <= tol * (1.0 + abs(b))


def confirm_mismatch(kernel: Kernel, spec: Spec, sizes: dict[str, int], inputs: dict[str, np.ndarray],
                     cells: list[tuple[str, tuple[int, ...]]]) -> Witness | None:
    """Run kernel and spec on floats; return the first of ``cells`` where they differ."""
    trace = run_float(kernel, sizes, inputs)
    try:
        expected = evaluate(spec, _objects({n: inputs[n] for n in spec.inputs}), FloatBackend())
    except (SpecError, ZeroDivisionError, OverflowError):
        return None
    tol = tolerance(kernel)
    for name, index in cells:
        got, want = trace.outputs[name][index], expected[name][index]
        if not _close(got, want, tol) and not _same_once_stored(kernel, name, got, want, tol):
            example = Counterexample(
                inputs={"sizes": dict(sizes), **{n: np.asarray(inputs[n]).tolist() for n in spec.inputs}},
                reference={name: np.asarray(expected[name], dtype=float).tolist()},
                per_rank={"kernel": {name: np.asarray(trace.outputs[name], dtype=float).tolist()}},
                value=f"{name}{list(index)}: kernel {fmt(got)}, spec {fmt(want)}",
                confirmed=True, note="re-checked by running the lifted kernel on these inputs")
            through = tuple(sorted(trace.origins[name][index])) if name in trace.origins else ()
            return Witness((name, index), float(got), float(want), trace.lines[name][index], example, through)
    return None


def _same_once_stored(kernel: Kernel, name: str, got: Any, want: Any, tol: float) -> bool:
    """The kernel's output ``name`` is a narrow float and the spec's value, converted to it by
    torch, is the kernel's: the two differ only by the output's own rounding (a float8 output
    saturated at its largest value beside a spec value just above it), no evidence of a wrong
    kernel.  The conversion is torch's own, not a model of it."""
    from verifier.rules.casts import float_format
    try:
        dtype = kernel.buffer(name).dtype
    except KeyError:
        return False
    if float_format(dtype) is None:
        return False
    try:
        import torch
        target = torch_dtype(dtype)
    except ImportError:  # no torch: no claim
        return False
    if target is None:  # a dtype torch lacks: no claim
        return False
    return _close(got, torch.tensor(float(want), dtype=torch.float64).to(target).item(), tol)


def find_concrete_mismatch(kernel: Kernel, spec: Spec, sizes: dict[str, int],
                           cells: list[tuple[str, tuple[int, ...]]], tries: int = 8) -> Witness | None:
    """When the solver's model does not reproduce on floats, try a few random inputs."""
    for seed in range(tries):
        witness = confirm_mismatch(kernel, spec, sizes, random_inputs(kernel, sizes, seed), cells)
        if witness is not None:
            return witness
    if fractions_decide(kernel):  # small integers are exact in every float format: a conversion shows on fractions
        for seed in range(tries):
            witness = confirm_mismatch(kernel, spec, sizes, random_inputs(kernel, sizes, seed, fractions=True), cells)
            if witness is not None:
                return witness
    return None


def fractions_decide(kernel: Kernel) -> bool:
    """The kernel converts a value to float16, bfloat16 or float8 (a rounding) or a float to an
    integer (a truncation toward zero): small integers are exact through both, fractions are not."""
    return _converts(kernel, narrow=True) or _converts(kernel, narrow=False)


def _converts(kernel: Kernel, narrow: bool) -> bool:
    """A conversion to a narrow float (``narrow``) or from a float to an integer (a cast, or a
    copy between buffers of those dtypes)."""
    from verifier.rules.casts import float_format, kind

    def wanted(have: str | None, want: str | None) -> bool:
        if not want or have == want:
            return False
        return bool(float_format(want)) if narrow else kind(want) == "int" and kind(have or "float32") == "float"
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, TileOp) and stmt.kind == "copy":
            src, dst = stmt.operands[0], stmt.operands[1]
            try:
                have, want = kernel.buffer(src.buffer).dtype, kernel.buffer(dst.buffer).dtype
            except KeyError:
                continue
            if wanted(have, want):
                return True
        exprs = [stmt.value] if isinstance(stmt, Store) else []
        if any(isinstance(e, Call) and e.fn == "cast" and wanted(e.source, e.dtype) for x in exprs
               for e in walk_expr(x)):
            return True
    return False
