"""Source recipes for Megatron-core code: layer flags and the tensor-parallel mapping functions.

Megatron code does not call collectives; it says where they go.  An all-reduce becomes
``reduce_from_tensor_model_parallel_region(...)`` around the partial value (or its removal
unwraps one), an all-gather of a column-parallel output becomes ``gather_output=True`` on
that ``ColumnParallelLinear`` (else ``gather_from_tensor_model_parallel_region``), sequence
gathers and scatters use the sequence-parallel mappings.
"""
from __future__ import annotations

from typing import Iterable

import libcst as cst
import libcst.matchers as m

from .editor import CannotPatch, SourceEditor
from .explicit import PatchContext, _is, argument, with_keyword
from .locate import locate, producer, value_rank

MAPPINGS = "megatron.core.tensor_parallel.mappings"


def _short(code: str, limit: int = 40) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


def _mapping(ctx: PatchContext, function: str) -> str:
    return ctx.editor.need(MAPPINGS, function)


def _wrap_value(ctx: PatchContext, function: str) -> None:
    """``value`` -> ``function(value)``: around the expression, or re-binding the variable."""
    located = locate(ctx.editor, ctx.program, ctx.change.value, ctx.synthetic)
    name = _mapping(ctx, function)
    what = located.variable or _short(ctx.editor.code(located.expression))
    ctx.editor.notes.append(f"wrap `{what}` (line {ctx.editor.line_of(located.statement)}) in {function}(...)")
    if located.variable is not None:
        if ctx.change.target_line is not None:
            ctx.editor.insert_before(ctx.editor.statement_at(ctx.change.target_line),
                                     f"{located.variable} = {name}({located.variable})")
        else:
            ctx.editor.insert_after(located.statement, f"{located.variable} = {name}({located.variable})")
        return
    ctx.editor.replace(located.expression,
                       lambda node: cst.Call(func=cst.parse_expression(name), args=[cst.Arg(node)]))


def _layer_constructor(ctx: PatchContext, statement: cst.CSTNode, kinds: tuple[str, ...]) -> cst.Call | None:
    """The ``self.x = Layer(...)`` call of the one ``self.x(...)`` layer called in ``statement``."""
    found = []
    for call in ctx.editor.calls_in(statement):
        if not m.matches(call.func, m.Attribute(value=m.Name("self"))):
            continue
        attribute = call.func.attr.value
        for assign in m.findall(ctx.editor.module, m.Assign(targets=[m.AssignTarget(
                m.Attribute(value=m.Name("self"), attr=m.Name(attribute)))])):
            if isinstance(assign.value, cst.Call) and ctx.editor.resolve(assign.value.func) in kinds:
                found.append(assign.value)
    return found[0] if len(found) == 1 else None


def insert_all_reduce(ctx: PatchContext) -> None:
    _wrap_value(ctx, "reduce_from_tensor_model_parallel_region")


def _dual(ctx: PatchContext) -> str | None:
    """The backward dual the fix was verified with (None: the default; anything when no gradients)."""
    return ctx.change.attr_dict.get("grad", "default" if getattr(ctx.program, "gradients", ()) else None)


def insert_all_gather(ctx: PatchContext) -> None:
    """Last dim, gradient split: gather_output=True on the column-parallel layer, or
    gather_from_tensor_model_parallel_region; sequence dim, gradient reduce-scattered:
    gather_from_sequence_parallel_region."""
    dim = ctx.change.attr_dict.get("dim", 0)
    last = value_rank(ctx.program, ctx.change.value) - 1
    dual = _dual(ctx)
    if dim in (-1, last) and dual in (None, "split"):
        index = producer(ctx.program, ctx.change.value)
        statement = ctx.editor.statement_at(ctx.program.ops[index].span.line if index is not None else None)
        column = _layer_constructor(ctx, statement, ("megatron.ColumnParallelLinear",))
        if column is not None and ctx.change.target_line is None and ctx.program.ops[index].kind == "linear":
            gather = argument(column, 99, "gather_output")
            if gather is not None and m.matches(gather.value, m.Name("True")):
                raise CannotPatch("the layer already gathers its output")
            ctx.editor.replace(column, lambda node: with_keyword(node, "gather_output", cst.Name("True")))
            ctx.editor.notes.append(f"ColumnParallelLinear(gather_output=True) at line {ctx.editor.line_of(column)}")
            return
        _wrap_value(ctx, "gather_from_tensor_model_parallel_region")
    elif dim == 0 and dual in (None, "default"):
        _wrap_value(ctx, "gather_from_sequence_parallel_region")
    else:
        raise CannotPatch(f"no Megatron mapping gathers dim {dim} with a {dual} backward")


def insert_reduce_scatter(ctx: PatchContext) -> None:
    if ctx.change.attr_dict.get("dim", 0) != 0:
        raise CannotPatch("Megatron reduce-scatters along the sequence (first) dim only")
    _wrap_value(ctx, "reduce_scatter_to_sequence_parallel_region")


def insert_local_chunk(ctx: PatchContext) -> None:
    """This rank's chunk of a replicated value: the scatter mappings (free in the forward pass)."""
    dim = ctx.change.attr_dict.get("dim", 0)
    last = value_rank(ctx.program, ctx.change.value) - 1
    if _dual(ctx) not in (None, "all_gather"):
        raise CannotPatch("Megatron's scatter mappings all-gather the gradient")
    if dim in (-1, last):
        _wrap_value(ctx, "scatter_to_tensor_model_parallel_region")
    elif dim == 0:
        _wrap_value(ctx, "scatter_to_sequence_parallel_region")
    else:
        raise CannotPatch("Megatron scatters along the last or the sequence dim only")


def remove_mapping(ctx: PatchContext) -> None:
    """Unwrap the mapping call that performs the removed collective."""
    names = {"all_reduce": ("megatron.reduce_from_tensor_model_parallel_region",),
             "all_gather": ("megatron.gather_from_tensor_model_parallel_region",
                            "megatron.gather_from_sequence_parallel_region"),
             "reduce_scatter": ("megatron.reduce_scatter_to_sequence_parallel_region",)}.get(ctx.change.kind, ())
    statement = ctx.editor.statement_at(ctx.change.line)
    calls = [c for c in ctx.editor.calls_in(statement) if ctx.editor.resolve(c.func) in names]
    if len(calls) != 1 or not calls[0].args:
        raise CannotPatch(f"expected one mapping call for the {ctx.change.kind} on line {ctx.change.line}")
    ctx.editor.replace(calls[0], lambda node: node.args[0].value)
    ctx.editor.notes.append(f"drop {ctx.editor.code(calls[0].func)}(...) around "
                            f"`{_short(ctx.editor.code(calls[0].args[0].value))}` (line {ctx.change.line})")


def _single_step(kind: str):
    def test(change) -> bool:
        return change.action == "insert" and len(change.steps) == 1 and change.steps[0].kind == kind
    return test


RECIPES = (
    (_single_step("all_reduce"), insert_all_reduce),
    (_single_step("all_gather"), insert_all_gather),
    (_single_step("reduce_scatter"), insert_reduce_scatter),
    (_single_step("local_chunk"), insert_local_chunk),
    (_is("remove"), remove_mapping),
)


# --- idioms recognised in the source ----------------------------------------------------------

def gather_output_into_input_parallel(source: str, path: str) -> Iterable[tuple[str, SourceEditor]]:
    """A column-parallel layer that gathers its output, in a module whose row-parallel layer
    expects its input already split: keep the column-parallel output split."""
    editor = SourceEditor(source, path)
    rows = [call for call in m.findall(editor.module, m.Call())
            if editor.resolve(call.func) == "megatron.RowParallelLinear"
            and (arg := argument(call, 99, "input_is_parallel")) is not None and m.matches(arg.value, m.Name("True"))]
    if not rows:
        return
    for call in m.findall(editor.module, m.Call()):
        if editor.resolve(call.func) != "megatron.ColumnParallelLinear":
            continue
        gather = argument(call, 99, "gather_output")
        if gather is None or not m.matches(gather.value, m.Name("True")):
            continue
        fresh = SourceEditor(source, path)
        target = next(c for c in m.findall(fresh.module, m.Call()) if fresh.line_of(c) == editor.line_of(call)
                      and fresh.resolve(c.func) == "megatron.ColumnParallelLinear")
        fresh.replace(target, lambda node: with_keyword(node, "gather_output", cst.Name("False")))
        yield (f"keep the ColumnParallelLinear output at line {editor.line_of(call)} split (gather_output=False): "
               f"the RowParallelLinear after it expects its input split (input_is_parallel=True)", fresh)


DIRECT = (gather_output_into_input_parallel,)

