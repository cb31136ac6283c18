"""Build IR programs in Python without going through the text parser.

A plan unrolls into thousands of small programs (one per layer block and per parameter
synchronisation); parsing text for each would dominate the run time, so the generators
build ``Program`` objects directly.  Spans are the line numbers the program has when it is
printed with ``verifier.text_format.print_program``, so a finding's line can be shown in
context with ``print_program(program).splitlines()[line - 1]``.
"""
from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from ..ir import Dim, Gradient, Mesh, Op, Output, Program, Span, TensorSpec
from ..placements import Placement, R, parse_placement

Placements = dict[str, str]  # mesh dim -> "S(0)" | "R" | "P(sum)" ...; dims left out are R


@functools.lru_cache(maxsize=None)
def _placement(text: str) -> Placement:
    return parse_placement(text)


class ProgramBuilder:
    """Collects inputs, ops, outputs and gradient specs; ``build()`` returns the ``Program``.

    ``b.op("h", "matmul", "x", "w")`` adds ``h = matmul(x, w)`` and returns ``"h"``; names
    get the builder's ``prefix`` so the programs of different layers read differently
    (their canonical forms do not: ``canonical.py`` renames values).
    """

    def __init__(self, mesh: Mesh, dims: dict[str, int | None], prefix: str = "",
                 requires: tuple[str, ...] = ()):
        self.mesh = mesh
        self.dims = dict(dims)
        self.prefix = prefix
        self.requires = tuple(requires)
        self.inputs: list[TensorSpec] = []
        self.ops: list[Op] = []
        self.outputs: list[Output] = []
        self.gradients: list[Gradient] = []
        self.backward_ops: list[Op] = []

    def name(self, local: str) -> str:
        return f"{self.prefix}{local}"

    def placements(self, spec: Placements | None) -> tuple[Placement, ...]:
        spec = spec or {}
        unknown = set(spec) - set(self.mesh.names)
        if unknown:
            raise ValueError(f"placement over {sorted(unknown)[0]!r}, which is not a dim of mesh {self.mesh}")
        return tuple(_placement(spec[name]) if name in spec else R for name in self.mesh.names)

    def input(self, local: str, shape: tuple[Dim, ...] | list[Dim], placements: Placements | None = None,
              dtype: str = "f32", bounds: tuple[Dim, Dim] | None = None) -> str:
        name = self.name(local)
        self.inputs.append(TensorSpec(name, tuple(shape), dtype, self.placements(placements), Span(), bounds))
        return name

    def op(self, local: str | None, kind: str, *args: str, **attrs: Any) -> str:
        """One op with one result (or none when ``local`` is None); returns the result name."""
        results = () if local is None else (self.name(local),)
        self.ops.append(Op(results, kind, tuple(args), dict(attrs)))
        return results[0] if results else ""

    def output(self, name: str, placements: Placements | None = None) -> None:
        self.outputs.append(Output(name, self.placements(placements)))

    def grad(self, input_name: str, value: str | None = None, placements: Placements | None = None) -> None:
        """``grad input [= value] [{placements}]``: the gradient the check compares."""
        self.gradients.append(Gradient(input_name, value or f"grad_{input_name}",
                                       self.placements(placements) if placements is not None else ()))

    def sync(self, local: str, kind: str, *args: str, **attrs: Any) -> str:
        """An op of the ``backward`` section (gradient synchronisation after the backward pass)."""
        name = self.name(local)
        self.backward_ops.append(Op((name,), kind, tuple(args), dict(attrs)))
        return name

    def build(self) -> Program:
        return with_print_spans(Program(self.mesh, tuple(self.inputs), tuple(self.ops), tuple(self.outputs),
                                        dict(self.dims), self.requires, None, tuple(self.gradients),
                                        tuple(self.backward_ops)))


def with_print_spans(program: Program) -> Program:
    """Give every statement the line it has in ``print_program(program)``."""
    line = 1 + (1 if program.source else 0) + (1 if program.dims else 0) + len(program.requires)
    inputs = []
    for spec in program.inputs:
        line += 1
        inputs.append(replace(spec, span=Span(line)))
    ops = []
    for op in program.ops:
        line += 1
        ops.append(replace(op, span=Span(line)))
    outputs = []
    for out in program.outputs:
        line += 1
        outputs.append(replace(out, span=Span(line)))
    backward = []
    if program.backward_ops:
        line += 1
        for op in program.backward_ops:
            line += 1
            backward.append(replace(op, span=Span(line)))
    gradients = []
    for gradient in program.gradients:
        line += 1
        gradients.append(replace(gradient, span=Span(line)))
    return replace(program, inputs=tuple(inputs), ops=tuple(ops), outputs=tuple(outputs),
                   backward_ops=tuple(backward), gradients=tuple(gradients))
