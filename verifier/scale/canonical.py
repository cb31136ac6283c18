"""Canonical structural form of a program: equal forms have the same proof.

Two programs with the same canonical form differ only in the names of their values and in
source lines: renaming SSA values (consistently, including the ``grad_<input>`` names the
backward section reads) and moving spans changes neither the values computed nor any
check's verdict.  So a proof of one is a proof of every program with its form, and the
scale checker proves each form once.

The form covers everything semantic: mesh (names and sizes), dim symbols with their
values, requirements, inputs (order, shape, dtype, placements, value bounds), ops in order
(kind, arguments, results, every attribute), outputs and their placements, gradient specs
and the backward section.
"""
from __future__ import annotations

import hashlib
from typing import Any

from ..ir import Op, Program

_RESERVED_ATTR_NAMES = ("handle",)  # attributes that name values rather than describe the op


class _Names:
    def __init__(self) -> None:
        self.table: dict[str, str] = {}
        self.count = 0

    def define(self, name: str) -> str:
        if name not in self.table:
            self.table[name] = f"%{self.count}"
            self.count += 1
        return self.table[name]

    def use(self, name: str) -> str:
        # an undefined name keeps a marker of its own: the structure check reports it
        return self.table.get(name, f"?{name}")


def _value(item: Any) -> str:
    if isinstance(item, list):
        return "[" + ",".join(_value(v) for v in item) + "]"
    return repr(item)


def _op(op: Op, names: _Names) -> str:
    args = ",".join(names.use(a) for a in op.args)
    attrs = []
    for key in sorted(op.attrs):
        value = op.attrs[key]
        if key in _RESERVED_ATTR_NAMES and isinstance(value, str):
            value = names.define(f"handle:{value}")
        attrs.append(f"{key}={_value(value)}")
    results = ",".join(names.define(r) for r in op.results)
    return f"{results}={op.kind}({args};{';'.join(attrs)})"


def canonical_text(program: Program, with_dim_values: bool = True) -> str:
    """The canonical form as text (``with_dim_values=False``: symbols without their values)."""
    names = _Names()
    parts = ["mesh " + ",".join(f"{n}={s}" for n, s in program.mesh.dims)]
    dims = sorted(program.dims.items())
    parts.append("dims " + ",".join(f"{n}={v if with_dim_values else ''}" for n, v in dims))
    parts.extend(f"require {r}" for r in program.requires)
    for spec in program.inputs:
        name = names.define(spec.name)
        names.table.setdefault(f"grad_{spec.name}", f"grad_{name}")
        bounds = f"{list(spec.bounds)}{list(spec.extra_values) if spec.extra_values else ''}" if spec.bounds else ""
        parts.append(f"in {name}:{spec.dtype}{list(spec.shape)}{[str(p) for p in spec.placements]}{bounds}")
    if program.functions:
        parts.extend(f"def {name}:{function!r}" for name, function in sorted(program.functions.items()))
    parts.extend(_op(op, names) for op in program.ops)
    parts.extend(f"out {names.use(o.name)}{[str(p) for p in o.placements]}" for o in program.outputs)
    parts.extend("bw " + _op(op, names) for op in program.backward_ops)
    parts.extend(f"grad {names.use(g.input)}={names.use(g.value)}{[str(p) for p in g.placements]}"
                 for g in program.gradients)
    return "\n".join(parts)


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def canonical_hash(program: Program, with_dim_values: bool = True) -> str:
    return digest(canonical_text(program, with_dim_values))
