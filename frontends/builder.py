"""Collects the IR program while the source is read: inputs, SSA ops, outputs.

Ops are kept as mutable records until the end so that two things the source only decides
later can be filled in: the name of an op's result (a temporary becomes ``q`` when the
statement assigns it to ``q``) and the concatenation dim of a gather whose reader comes
later (see ``values.PendingGather``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from verifier.ir import Function, Gradient, Mesh, Op, Output, Program, Span, TensorSpec
from verifier.placements import Placement

from .symbolic import Dims
from .values import Tensor, UnsupportedError

MAX_OPS = 200_000  # IR ops per program: beyond this a file is a generator of code, not a model to prove

_NAME_RE = re.compile(r"[^A-Za-z_0-9.]")


@dataclass
class OpRecord:
    results: list[str]
    kind: str
    args: list[str]
    attrs: dict[str, Any]
    line: int | None


@dataclass
class Builder:
    mesh: Mesh
    dims: Dims
    source: str | None = None
    inputs: list[TensorSpec] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    temps: set[str] = field(default_factory=set)
    when: list[str] = field(default_factory=list)
    counter: int = 0
    functions: dict[str, tuple[list[str], list[OpRecord], list[str], int | None]] = field(default_factory=dict)
    gradients: list[tuple[str, str, tuple, int | None]] = field(default_factory=list)
    backward_ops: list[OpRecord] = field(default_factory=list)

    # -- names --------------------------------------------------------------------------
    def fresh(self, base: str | None = None) -> str:
        if base is None:
            while True:
                self.counter += 1
                name = f"t{self.counter}"
                if name not in self.used:
                    break
            self.temps.add(name)
        else:
            base = _NAME_RE.sub("_", base) or "v"
            if not (base[0].isalpha() or base[0] == "_"):
                base = "v" + base
            name, n = base, 0
            while name in self.used:
                n += 1
                name = f"{base}_{n}"
        self.used.add(name)
        return name

    def name_result(self, tensor: Tensor, variable: str) -> None:
        """Give the value just computed the name of the variable it is assigned to."""
        if not self.ops or tensor.name not in self.temps:
            return
        record = self.ops[-1]
        if tensor.name not in record.results:
            return
        new = self.fresh(variable)
        record.results[record.results.index(tensor.name)] = new
        self.temps.discard(tensor.name)
        tensor.name = new

    # -- program ------------------------------------------------------------------------
    def add_input(self, name: str, shape: tuple, dtype: str, placements: tuple[Placement, ...], line: int | None,
                  bounds: tuple | None = None) -> str:
        name = self.fresh(name)
        self.inputs.append(TensorSpec(name, tuple(shape), dtype, tuple(placements), Span(line), bounds))
        return name

    def emit(self, kind: str, args: list[str], attrs: dict[str, Any], line: int | None, results: int = 1,
             *, unconditional: bool = False) -> tuple[list[str], OpRecord]:
        if len(self.ops) >= MAX_OPS:
            raise UnsupportedError(line, "program", f"more than {MAX_OPS:,} ops after unrolling; verify-agent "
                                                    f"checks programs up to that size")
        names = [self.fresh() for _ in range(results)]
        attrs = dict(attrs)
        if self.when and not unconditional:
            attrs["when"] = " and ".join(f"({c})" if len(self.when) > 1 else c for c in self.when)
        record = OpRecord(names, kind, list(args), attrs, line)
        self.ops.append(record)
        return names, record

    def take_ops(self, start: int) -> list[OpRecord]:
        """Remove and return the ops emitted since ``start`` (they become a function body)."""
        taken = self.ops[start:]
        del self.ops[start:]
        return taken

    def program(self, outputs: list[tuple[str, tuple[Placement, ...], int | None]]) -> Program:
        ops = tuple(_op(r) for r in self.ops)
        functions = {name: Function(name, tuple(params), tuple(_op(r) for r in body), tuple(returns), Span(line))
                     for name, (params, body, returns, line) in self.functions.items()}
        outs = tuple(Output(name, placements, Span(line)) for name, placements, line in outputs)
        every = ops + tuple(op for f in functions.values() for op in f.ops) + tuple(_op(r) for r in self.backward_ops)
        symbols = self._symbols(every)
        dims = {str(s): v for s, v in sorted(self.dims.values.items(), key=lambda kv: str(kv[0]))
                if str(s) in symbols}
        requires = tuple(r for r in self.dims.requires if _names_in(r) <= set(dims))
        gradients = tuple(Gradient(name, value, placements, Span(line))
                          for name, value, placements, line in self.gradients)
        return Program(self.mesh, tuple(self.inputs), ops, outs, dims, requires, self.source, gradients,
                       tuple(_op(r) for r in self.backward_ops), functions)

    def _symbols(self, ops: tuple[Op, ...]) -> set[str]:
        names: set[str] = set()
        known = {str(s) for s in self.dims.values}
        for spec in self.inputs:
            for d in list(spec.shape) + list(spec.bounds or ()):
                names |= _names_in(d) & known
        for op in ops:
            for key, value in op.attrs.items():
                if key in ("when", "peer", "mesh_dim", "handle", "op", "dtype", "reduction"):
                    continue
                for item in value if isinstance(value, list) else [value]:
                    names |= _names_in(item) & known
        for requirement in self.dims.requires:
            if _names_in(requirement) & names:
                names |= _names_in(requirement) & known
        # requirements may tie a used symbol to others: close over them
        changed = True
        while changed:
            changed = False
            for requirement in self.dims.requires:
                found = _names_in(requirement) & known
                if found & names and not found <= names:
                    names |= found
                    changed = True
        return names


def _op(record: OpRecord) -> Op:
    return Op(tuple(record.results), record.kind, tuple(record.args), dict(record.attrs), Span(record.line))


def _names_in(value: Any) -> set[str]:
    if not isinstance(value, str):
        return set()
    return set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", value))
