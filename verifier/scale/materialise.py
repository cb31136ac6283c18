"""Materialise the training step of a small dense plan on one tensor-parallel group, as ONE program.

The scale checker never builds the unrolled program; this module does, for the cases where
that is still cheap (a dense model, a few layers, one microbatch): the embedding, every
layer's blocks and the head, chained through the residual stream, with every parameter's
gradient and the blocks' tensor-parallel synchronisation.  Checking it with the ordinary
``verifier.check.check_program`` (its own size reduction, one proof for the whole stack)
and comparing with ``check_plan`` on the same plan tests the compositional argument of
``verifier/scale/__init__.py`` on real programs, faults included.

Blocks that read an outer coordinate are taken as the ranks at ``coordinates`` run them
(default: the first coordinate class of each block).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Program
from . import blocks
from .faults import NO_FAULT, Fault
from .plans import Plan
from .symmetry import specialise


def materialise(plan: Plan, fault: Fault = NO_FAULT, coordinates: dict[str, int] | None = None) -> Program:
    if plan.model.is_moe:
        raise ValueError("materialise handles dense models (a MoE layer adds the ep mesh dim)")
    chain = [blocks.embedding(plan)]
    for layer in range(plan.model.layers):
        chain += blocks.layer_blocks(plan, layer, fault)
    chain.append(blocks.head(plan))
    programs = [_at(block.program, plan, coordinates or {}) for block in chain]
    inputs, ops, gradients, backward = [], [], [], []
    dims: dict[str, int | None] = {}
    requires: list[str] = []
    previous: str | None = None
    for block, program in zip(chain, programs):
        residual = program.inputs[0].name if block.kind != blocks.EMBEDDING else None
        rename = {residual: previous} if residual else {}
        inputs += [spec for spec in program.inputs if spec.name != residual]
        ops += [replace(op, args=tuple(rename.get(a, a) for a in op.args)) for op in program.ops]
        backward += list(program.backward_ops)
        gradients += [g for g in program.gradients if g.input != residual]
        dims.update(program.dims)
        requires += [r for r in program.requires if r not in requires]
        previous = program.outputs[0].name
    head = programs[-1]
    return Program(head.mesh, tuple(inputs), tuple(ops), head.outputs, dims, tuple(requires), None,
                   tuple(gradients), tuple(backward))


def _at(program: Program, plan: Plan, coordinates: dict[str, int]) -> Program:
    for coordinate, specialised in specialise(program, plan.mesh):
        if coordinate.everywhere:
            return specialised
        wanted = tuple(coordinates.get(dim, 0) for dim in coordinate.dims)
        if wanted in coordinate.members:
            return specialised
    raise ValueError(f"no coordinate class holds {coordinates}")
