"""Inline ``call`` ops (bodies of custom autograd functions) into the op list.

``y = call(x, forward=f_fwd, backward=f_bwd)`` runs the ops of ``def f_fwd(x)``.  Inlined ops
keep their own source lines and are tagged ``call_region=K``; the last one also records the
call's arguments, results and backward function, so ``backward.py`` can use the user's
backward body for the whole region instead of deriving VJPs op by op.  The backward body
takes the forward arguments followed by one gradient per result, and returns one gradient
per argument (``none`` for no gradient).
"""
from __future__ import annotations

from dataclasses import replace

from .ir import Function, Op, Program


class CallError(Exception):
    def __init__(self, op: Op, message: str):
        self.line = op.span.line
        super().__init__(message)


def rename_body(function: Function, prefix: str, bindings: dict[str, str]) -> tuple[list[Op], dict[str, str]]:
    """The function's ops with parameters bound to ``bindings`` and locals prefixed."""
    names = dict(bindings)
    ops = []
    for op in function.ops:
        args = tuple(names.get(a, a) for a in op.args)
        results = tuple(f"{prefix}{r}" for r in op.results)
        names.update(zip(op.results, results))
        attrs = dict(op.attrs)
        if "handle" in attrs:
            attrs["handle"] = f"{prefix}{attrs['handle']}"
        ops.append(replace(op, args=args, results=results, attrs=attrs))
    return ops, names


def expand_calls(program: Program) -> Program:
    if not any(op.kind == "call" for op in program.ops):
        return program
    ops: list[Op] = []
    for index, op in enumerate(program.ops):
        if op.kind != "call":
            ops.append(op)
            continue
        function = program.functions.get(op.attrs.get("forward"))
        if function is None:
            raise CallError(op, f"call names forward={op.attrs.get('forward')!r}, which is not defined")
        if len(function.params) != len(op.args) or len(function.returns) != len(op.results):
            raise CallError(op, f"call of {function.name} passes {len(op.args)} arguments for {len(function.params)} "
                                f"parameters and takes {len(op.results)} results of {len(function.returns)}")
        body, names = rename_body(function, f"c{index}.", dict(zip(function.params, op.args)))
        tag = {"call_region": index}
        ops.extend(replace(b, attrs={**b.attrs, **tag}) for b in body)
        for position, (result, returned) in enumerate(zip(op.results, function.returns)):
            attrs = dict(tag)
            if position == len(op.results) - 1:
                attrs.update(call_args=list(op.args), call_results=list(op.results),
                             backward=op.attrs.get("backward") or "none")
            ops.append(Op((result,), "identity", (names.get(returned, returned),), attrs, op.span))
    return replace(program, ops=tuple(ops))
