"""Distributed lifting: run a kernel per rank on sharded inputs and derive the collective.

With ``--mesh tp=4 --shard A=Shard(1) --shard B=Shard(0)`` every rank runs the same
kernel on its local shards (the sharded size, e.g. ``K``, becomes ``K/4`` in the kernel).
The placement of the kernel's output follows from its spec by DTensor-style rules written
for one mesh dim (``PLACEMENT_RULES``: matmul with ``[Partial, Shard(1), Shard(0)]`` and so
on); the collective that turns it into the expected output placement (``Replicate``
unless ``--shard C=...`` says otherwise) follows from the pair: ``Partial -> Replicate``
is an all-reduce, ``Partial -> Shard(d)`` a reduce-scatter, ``Shard(d) -> Replicate`` an
all-gather.  The derived per-rank program is then proven equal to the spec on the global
tensors with Z3 on reduced sizes (each shard keeps the kernel's tiling cases), and
printed in the IR's text form.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import z3

from verifier.placements import Partial, Placement, R, Replicate, Shard, parse_placement
from verifier.report import ERROR, Counterexample, Diagnostic

from .backends import FloatBackend, Z3Backend
from .checks import ROUNDING_NOTE, _without_roundings, integer_ranges, symbolic_tensors, written_buffers
from .counterexample import fmt, random_inputs
from .errors import LiftInputError, Unsupported
from .interpreter import Machine
from .program import Kernel, Var
from .size_env import eval_size
from .sizes import plan
from .spec import Spec, SpecError, evaluate

_MESH_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(\d+)\s*$")


def parse_mesh(text: str | None, path: str) -> tuple[tuple[str, int], ...]:
    if not text:
        return ()
    dims = []
    for part in text.split(","):
        match = _MESH_RE.match(part)
        if not match or int(match.group(2)) < 1:
            raise LiftInputError(f"expected --mesh like tp=4, got {text!r}", "--mesh", 1)
        dims.append((match.group(1), int(match.group(2))))
    if len(dims) != 1:
        raise LiftInputError(f"expected one mesh dim for a kernel (--mesh tp=4), got {text!r}", "--mesh", 1)
    return tuple(dims)


def parse_shards(items: list[str], buffers: list[str], path: str) -> dict[str, Placement]:
    """``A=Shard(1)``, ``A=S(1)``, ``B=Replicate()``, ``B=R``."""
    out: dict[str, Placement] = {}
    for item in items:
        name, _, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if name not in buffers:
            raise LiftInputError(f"expected --shard to name a kernel tensor ({', '.join(buffers)}), got {name!r}",
                                 "--shard", 1)
        text = re.sub(r"^Shard\((-?\d+)\)$", r"S(\1)", text)
        text = {"Replicate()": "R", "Replicate": "R", "Partial()": "P", "Partial": "P"}.get(text, text)
        try:
            out[name] = parse_placement(text)
        except ValueError:
            raise LiftInputError(f"expected a placement Shard(d) or Replicate() for {name}, got {text!r}",
                                 "--shard", 1) from None
    return out


# --- placement rules, one mesh dim (rows: output, inputs...) -------------------------------

PLACEMENT_RULES: dict[str, list[tuple[Placement, ...]]] = {
    "matmul": [(Shard(0), Shard(0), R), (Shard(1), R, Shard(1)), (Partial("sum"), Shard(1), Shard(0)), (R, R, R)],
    "add": [(Partial("sum"), Partial("sum"), Partial("sum"))],
    "sub": [(Partial("sum"), Partial("sum"), Partial("sum"))],
    "mul": [(Partial("sum"), Partial("sum"), R), (Partial("sum"), R, Partial("sum"))],
    "div": [(Partial("sum"), Partial("sum"), R)],
}
_LINEAR_UNARY = {"neg", "transpose"}


class PlacementError(Exception):
    """The spec has an op the per-rank kernel cannot compute on these placements."""


@dataclass
class _Derivation:
    placements: dict[str, Placement]
    ops: list[tuple[str, str, tuple[str, ...], dict[str, Any]]] = field(default_factory=list)
    counter: int = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"t{self.counter}"


def _rule(kind: str, args: list[Placement]) -> Placement:
    if all(isinstance(a, Replicate) for a in args):
        return R
    for row in PLACEMENT_RULES.get(kind, []):
        if tuple(row[1:]) == tuple(args):
            return row[0]
    if kind in ("add", "sub", "mul", "div", "max", "min") and len(set(args)) == 1 and isinstance(args[0], Shard):
        return args[0]
    raise PlacementError(f"{kind} of {', '.join(map(str, args))}")


def derive(spec_expr: ast.expr, deriv: _Derivation) -> str:
    """Translate a spec expression to IR ops, propagating placements; return the value."""
    def op(kind: str, args: list[str], attrs: dict[str, Any], placement: Placement) -> str:
        name = deriv.fresh()
        deriv.ops.append((name, kind, tuple(args), attrs))
        deriv.placements[name] = placement
        return name

    node = spec_expr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.BinOp):
        a, b = derive(node.left, deriv), derive(node.right, deriv)
        kind = {ast.MatMult: "matmul", ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}[type(node.op)]
        return op(kind, [a, b], {}, _rule(kind, [deriv.placements.get(a, R), deriv.placements.get(b, R)]))
    if isinstance(node, ast.Attribute) and node.attr == "T":
        a = derive(node.value, deriv)
        p = deriv.placements.get(a, R)
        return op("transpose", [a], {"dim0": 0, "dim1": 1}, Shard(1 - p.dim) if isinstance(p, Shard) else p)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        method = isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name)
                                                          and func.value.id in ("torch", "F", "np", "T"))
        operands = ([func.value] if method else []) + [a for a in node.args if not isinstance(a, ast.Constant)]
        literals = [a.value for a in node.args if isinstance(a, ast.Constant)]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if isinstance(k.value, ast.Constant)}
        dim = kwargs.get("dim", literals[0] if literals else -1)
        if name in ("to", "float", "half", "contiguous"):
            return derive(operands[0], deriv)
        a = derive(operands[0], deriv)
        p = deriv.placements.get(a, R)
        if name in ("sum", "max", "amax"):
            kind = "sum" if name == "sum" else "amax"
            if isinstance(p, Shard) and p.dim == dim:
                out: Placement = Partial("sum" if kind == "sum" else "max")
            elif isinstance(p, Shard):
                out = Shard(p.dim - (1 if p.dim > dim else 0))
            elif isinstance(p, Partial) and kind == "sum" and p.op == "sum":
                out = p
            elif isinstance(p, Replicate):
                out = R
            else:
                raise PlacementError(f"{name} over {p}")
            return op(kind, [a], {"dim": dim}, out)
        if name in ("relu", "exp", "softmax", "maximum"):
            kind = "relu" if name == "maximum" else name
            if isinstance(p, Partial):
                op(kind, [a], {"dim": dim} if kind == "softmax" else {}, p)
                raise PlacementError(f"non-linear {kind} applied to a {p} value")
            if kind == "softmax" and isinstance(p, Shard) and p.dim % 2 == dim % 2:
                raise PlacementError(f"softmax over dim {dim}, which is sharded")
            return op(kind, [a], {"dim": dim} if kind == "softmax" else {}, p)
        if name in ("matmul", "mm"):
            b = derive(operands[1], deriv)
            return op("matmul", [a, b], {}, _rule("matmul", [p, deriv.placements.get(b, R)]))
    raise PlacementError(f"spec expression {ast.unparse(node)}")


# --- collectives: placement pair -> (IR op, attrs, how it acts on per-rank values) ---------

def _collective(have: Placement, want: Placement) -> tuple[str, dict[str, Any]] | None:
    if have == want:
        return None
    if isinstance(have, Partial) and isinstance(want, Replicate):
        return "all_reduce", {"op": have.op}
    if isinstance(have, Partial) and isinstance(want, Shard):
        return "reduce_scatter", {"dim": want.dim, "op": have.op}
    if isinstance(have, Shard) and isinstance(want, Replicate):
        return "all_gather", {"dim": have.dim}
    raise PlacementError(f"no single collective turns {have} into {want}")


def _apply_collective(kind: str | None, attrs: dict[str, Any], outs: list[np.ndarray], have: Placement,
                      backend: Any) -> np.ndarray:
    """The global tensor the ranks hold after the collective."""
    if kind in ("all_reduce", "reduce_scatter"):
        total = outs[0].copy()
        combine: Callable = backend.add if attrs.get("op", "sum") == "sum" else backend.max
        for other in outs[1:]:
            for index in np.ndindex(total.shape):
                total[index] = combine(total[index], other[index])
        return total
    if kind == "all_gather" or isinstance(have, Shard):
        return np.concatenate(outs, axis=have.dim if isinstance(have, Shard) else attrs["dim"])
    return outs[0]


@dataclass
class DistResult:
    diagnostics: list[Diagnostic]
    proven: list[str]
    program_text: str | None = None
    summary: str = ""


def check_distributed(kernel: Kernel, spec: Spec, mesh_dims: tuple[tuple[str, int], ...],
                      placements: dict[str, Placement]) -> DistResult:
    mesh_name, world = mesh_dims[0]
    line = kernel.grid_line or kernel.line
    if len(spec.outputs) != 1 or len(spec.statements) != 1:
        raise Unsupported(line, "distributed lifting supports specs with one output statement")
    out_name = spec.outputs[0]
    want = placements.get(out_name, R)
    deriv = _Derivation({name: placements.get(name, R) for name in spec.inputs})
    problem = None
    try:
        result = derive(spec.statements[0][1], deriv)
        have = deriv.placements.get(result, R)
    except PlacementError as exc:
        problem = str(exc)
        partial = [p for p in deriv.placements.values() if isinstance(p, Partial)]
        have = partial[0] if partial else R
    try:
        collective = _collective(have, want)
    except PlacementError as exc:
        return DistResult([Diagnostic("placement", ERROR, str(exc), line)], [])
    local, sharded = _local_symbols(kernel, placements, world, line)
    if isinstance(local, Diagnostic):
        return DistResult([local], [])
    text = _program_text(kernel, spec, mesh_name, world, placements, deriv, collective, want, out_name, line)
    coll_text = f"{collective[0]}({', '.join(f'{k}={v}' for k, v in collective[1].items())}) over {mesh_name}" \
        if collective else "no collective"
    shard_text = ", ".join(f"{n} {p}" for n, p in placements.items() if n in spec.inputs) or "replicated inputs"
    summary = f"per-rank kernel on {shard_text} gives {out_name} as {have}; needs {coll_text} to reach {want}"
    diagnostics, proven = _prove(kernel, spec, mesh_name, world, placements, local, sharded, collective, have,
                                 out_name, problem, summary, line)
    return DistResult(diagnostics, proven, text, summary)


def _local_symbols(kernel: Kernel, placements: dict[str, Placement], world: int, line: int | None):
    """Sharded sizes: symbol -> local value in the file (None if unbound)."""
    sharded: dict[str, tuple[str, int]] = {}
    written = written_buffers(kernel)
    for name, placement in placements.items():
        if not isinstance(placement, Shard) or name in written:
            continue  # an output's placement is reached by the collective, not by the kernel
        buf = kernel.buffer(name)
        dim = placement.dim % len(buf.shape)
        size = buf.shape[dim]
        if not isinstance(size, Var):
            return Diagnostic("unsupported", ERROR, f"{name} is sharded along dim {dim} of size {size}, which is not "
                              "a single size parameter", line), {}
        sharded[size.name] = (name, dim)
    for buf in kernel.params:
        for dim, size in enumerate(buf.shape):
            if isinstance(size, Var) and size.name in sharded and not (
                    isinstance(placements.get(buf.name), Shard) and placements[buf.name].dim % len(buf.shape) == dim):
                if buf.name in written:
                    continue  # an output whose sharded dim is local by construction
                other, odim = sharded[size.name]
                return Diagnostic("placement", ERROR, f"{other} is sharded along {size.name} (dim {odim}) but {buf.name} "
                                  f"holds all of {size.name}: the per-rank kernel cannot see {size.name}/{world} for "
                                  f"one and {size.name} for the other", line), {}
    original = kernel.size_values
    local: dict[str, int | None] = {}
    for symbol in sharded:
        value = original.get(symbol)
        if value is not None and value % world:
            return Diagnostic("placement", ERROR, f"{symbol}={value} is not divisible by the mesh size {world}",
                              line), {}
        local[symbol] = None if value is None else value // world
    return local, sharded


def _prove(kernel: Kernel, spec: Spec, mesh_name: str, world: int, placements: dict[str, Placement],
           local: dict[str, int | None], sharded: dict, collective, have: Placement, out_name: str,
           problem: str | None, summary: str, line: int | None) -> tuple[list[Diagnostic], list[str]]:
    local_kernel = kernel.with_sizes({**kernel.size_values, **local})
    reduction = plan(local_kernel)
    local_sizes = reduction.sizes
    global_sizes = dict(local_sizes)
    for symbol in sharded:
        global_sizes[symbol] = local_sizes[symbol] * world
    z3b = Z3Backend()
    global_tensors = symbolic_tensors(kernel, global_sizes)
    outs = []
    for rank in range(world):
        tensors = _rank_tensors(kernel, global_tensors, placements, rank, world, local_sizes)
        outs.append(Machine(kernel, local_sizes, z3b, tensors).run().outputs[out_name])
    # roundings to narrow floats that only flow to the output are taken as exact, as the kernel check does
    unrounded = [_without_roundings({out_name: out}) for out in outs]
    outs = [arrays[out_name] for arrays, _ in unrounded]
    if any(changed for _, changed in unrounded):
        summary = f"{summary} ({ROUNDING_NOTE})"
    kind, attrs = collective if collective else (None, {})
    assembled = _apply_collective(kind, attrs, outs, have, z3b)
    if problem is not None:  # the rules already say it is wrong: find the concrete witness first
        witness = _float_witness(kernel, spec, world, placements, local_sizes, global_sizes, kind, attrs, have,
                                 out_name)
        if witness is not None:
            return [_violation(spec, kind, mesh_name, world, problem, witness, line)], []
    try:
        expected = evaluate(spec, {n: global_tensors[n] for n in spec.inputs}, Z3Backend())[out_name]
    except SpecError as exc:
        return [Diagnostic("unsupported", ERROR, f"spec uses {exc}", line)], []
    if assembled.shape != expected.shape:
        return [Diagnostic("placement", ERROR, f"per-rank outputs assemble to {list(assembled.shape)} but the spec "
                           f"gives {list(expected.shape)}", line)], []
    solver = z3.Solver()
    solver.set("timeout", 20000)
    solver.add(z3.Or([assembled[i] != expected[i] for i in np.ndindex(expected.shape)]),
               *integer_ranges(kernel, global_tensors))
    status = solver.check()
    sizes_text = ", ".join(f"{k}={v}" for k, v in global_sizes.items())
    if status == z3.unsat and problem is None:
        return [], [f"{mesh_name}={world}: {summary}; proven equal to {spec.text} on reduced sizes {sizes_text}"]
    if status == z3.unknown:
        return [Diagnostic("unsupported", ERROR, f"Z3 could not decide the distributed equivalence "
                           f"({solver.reason_unknown()})", line)], []
    witness = _float_witness(kernel, spec, world, placements, local_sizes, global_sizes, kind, attrs, have, out_name)
    if witness is None:
        reason = problem or "Z3 witness not reproduced on floats"
        return [Diagnostic("unsupported", ERROR, f"distributed check inconclusive: {reason}", line)], []
    return [_violation(spec, kind, mesh_name, world, problem, witness, line)], []


def _violation(spec: Spec, kind: str | None, mesh_name: str, world: int, problem: str | None,
               witness: Counterexample, line: int | None) -> Diagnostic:
    message = (f"per-rank kernel + {kind or 'no collective'} over {mesh_name}={world} does not compute {spec.text}"
               + (f": {problem}" if problem else "") + f" ({witness.value})")
    return Diagnostic("distributed", ERROR, message, line, witness)


def _rank_tensors(kernel: Kernel, global_tensors: dict[str, np.ndarray], placements: dict[str, Placement],
                  rank: int, world: int, local_sizes: dict[str, int]) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    written = written_buffers(kernel)
    for buf in kernel.params:
        if buf.name in written:
            local_shape = tuple(eval_size(d, local_sizes) for d in buf.shape)
            init = np.empty(local_shape, dtype=object)
            for index in np.ndindex(local_shape):
                init[index] = z3.RealVal(0) if written[buf.name] else z3.Real(f"{buf.name}_init@{rank}{list(index)}")
            tensors[buf.name] = init
            continue
        array = global_tensors[buf.name]
        placement = placements.get(buf.name, R)
        if isinstance(placement, Shard):
            array = np.array_split(array, world, axis=placement.dim % array.ndim)[rank]
        tensors[buf.name] = array
    return tensors


def _float_witness(kernel: Kernel, spec: Spec, world: int, placements: dict[str, Placement],
                   local_sizes: dict[str, int], global_sizes: dict[str, int], kind: str | None,
                   attrs: dict[str, Any], have: Placement, out_name: str) -> Counterexample | None:
    fb = FloatBackend()
    shapes = {b.name: tuple(eval_size(d, global_sizes) for d in b.shape) for b in kernel.params}
    for seed in range(6):
        inputs = random_inputs(kernel, global_sizes, seed, shapes)
        objects = {n: a.astype(object) for n, a in inputs.items()}
        outs, per_rank = [], {}
        for rank in range(world):
            tensors = _rank_tensors_float(kernel, objects, placements, rank, world, local_sizes)
            out = Machine(kernel, local_sizes, fb, tensors).run().outputs[out_name]
            outs.append(out)
            per_rank[f"rank {rank}"] = {out_name: np.asarray(out, dtype=float).tolist()}
        got = np.asarray(_apply_collective(kind, attrs, outs, have, fb), dtype=float)
        want = np.asarray(evaluate(spec, {n: objects[n] for n in spec.inputs}, fb)[out_name], dtype=float)
        diff = np.argwhere(np.abs(got - want) > 1e-6 * (1 + np.abs(want)))
        if len(diff):
            index = tuple(int(i) for i in diff[0])
            return Counterexample(
                inputs={"sizes": dict(global_sizes), **{n: inputs[n].tolist() for n in spec.inputs}},
                reference={out_name: want.tolist()}, per_rank=per_rank,
                value=f"{out_name}{list(index)}: ranks give {fmt(got[index])}, spec {fmt(want[index])}",
                confirmed=True, note="re-checked by running the lifted kernel per rank on these inputs")
    return None


def _rank_tensors_float(kernel: Kernel, inputs: dict[str, np.ndarray], placements: dict[str, Placement],
                        rank: int, world: int, local_sizes: dict[str, int]) -> dict[str, np.ndarray]:
    tensors: dict[str, np.ndarray] = {}
    written = written_buffers(kernel)
    for buf in kernel.params:
        if buf.name in written:
            tensors[buf.name] = np.zeros(tuple(eval_size(d, local_sizes) for d in buf.shape)).astype(object)
            continue
        array = inputs[buf.name]
        placement = placements.get(buf.name, R)
        if isinstance(placement, Shard):
            array = np.array_split(array, world, axis=placement.dim % array.ndim)[rank]
        tensors[buf.name] = array
    return tensors


def _program_text(kernel: Kernel, spec: Spec, mesh_name: str, world: int, placements: dict[str, Placement],
                  deriv: _Derivation, collective, want: Placement, out_name: str, line: int | None) -> str | None:
    """The derived per-rank program in the IR's text form (``verifier.text_format``)."""
    from verifier.ir import Mesh, Op, Output, Program, Span, TensorSpec
    from verifier.text_format import print_program
    inputs = []
    for name in spec.inputs:
        buf = kernel.buffer(name)
        shape = tuple(str(d) for d in buf.shape)
        inputs.append(TensorSpec(name, shape, _short_dtype(buf.dtype), (placements.get(name, R),), Span(buf.line)))
    ops = [Op((res,), kind, args, attrs, Span(line)) for res, kind, args, attrs in deriv.ops]
    if not ops:
        return None
    last = ops[-1].results[0]
    rename = {last: f"{out_name}_local" if collective else out_name}
    ops = [Op(tuple(rename.get(r, r) for r in op.results), op.kind, tuple(rename.get(a, a) for a in op.args),
              dict(op.attrs, kernel=kernel.name) if i == len(ops) - 1 else op.attrs, op.span)
           for i, op in enumerate(ops)]
    if collective:
        kind, attrs = collective
        ops.append(Op((out_name,), kind, (f"{out_name}_local",), dict(attrs, mesh_dim=mesh_name), Span(line)))
    dims = {name: value for name, value in kernel.sizes}
    program = Program(Mesh(((mesh_name, world),)), tuple(inputs), tuple(ops), (Output(out_name, (want,)),),
                      dims, (), kernel.source)
    return print_program(program)


def _short_dtype(dtype: str) -> str:
    return {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int32": "i32"}.get(dtype, dtype)
