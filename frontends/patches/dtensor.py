"""Source recipes for DTensor code: placements and plan entries instead of collectives.

DTensor runs the collectives its layouts imply, so a missing all-reduce is a placement that
lies (``DTensor.from_local(y, mesh, [Replicate()])`` for partial sums -> ``Partial()``), and
an all-gather or a local chunk around a parallelised module is its plan entry's layout
(``ColwiseParallel(output_layouts=Replicate())``, ``RowwiseParallel(input_layouts=
Replicate())``).  Plan entries are found by the module path the IR names its parameters with
(``up.weight`` belongs to plan key ``"up"``).
"""
from __future__ import annotations

from typing import Iterable

import libcst as cst
import libcst.matchers as m

from .editor import CannotPatch, SourceEditor
from .explicit import PatchContext, argument, with_keyword
from .locate import base_name, producer, value_rank

TENSOR = "torch.distributed.tensor"


def _placement(ctx: PatchContext, name: str) -> str:
    return ctx.editor.need(TENSOR, name)


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    return None


def plan_entry(editor: SourceEditor, module_path: str, styles: tuple[str, ...]) -> cst.Call:
    """The ``ColwiseParallel(...)`` (etc.) call of a ``parallelize_module`` plan key."""
    found = []
    for element in m.findall(editor.module, m.DictElement()):
        if _string(element.key) == module_path and isinstance(element.value, cst.Call) and \
                editor.resolve(element.value.func) in styles:
            found.append(element.value)
    if len(found) != 1:
        raise CannotPatch(f"no single plan entry for module {module_path!r}")
    return found[0]


def _module_of(ctx: PatchContext, op_index: int | None) -> str:
    """``up`` for an op that reads the parameter ``up.weight``."""
    if op_index is None:
        raise CannotPatch("the value is not computed by a module")
    for arg in ctx.program.ops[op_index].args:
        if arg.endswith(".weight"):
            return arg[: -len(".weight")]
    raise CannotPatch("the op reads no module weight")


def from_local_partial(ctx: PatchContext) -> None:
    """All-reduce partial sums that ``DTensor.from_local`` declared replicated: declare them partial."""
    if ctx.change.attr_dict.get("op", "sum") != "sum":
        raise CannotPatch("only partial sums are spelled Partial()")
    variable = base_name(ctx.change.value)
    position = ctx.program.mesh.index(ctx.change.mesh_dim)
    for call in m.findall(ctx.editor.module, m.Call()):
        if ctx.editor.resolve(call.func) != "dtensor.from_local" or ctx.editor.line_of(call) < (ctx.change.line or 0):
            continue
        local = argument(call, 0, "local_tensor")
        placements = argument(call, 2, "placements")
        if local is None or not m.matches(local.value, m.Name(variable)) or placements is None or \
                not isinstance(placements.value, (cst.List, cst.Tuple)):
            continue
        elements = placements.value.elements
        if position >= len(elements):
            raise CannotPatch("the placements do not name this mesh dim")
        partial = cst.parse_expression(f"{_placement(ctx, 'Partial')}()")
        ctx.editor.replace(elements[position].value, partial)
        ctx.editor.notes.append(f"declare {variable} Partial() in DTensor.from_local at line "
                                f"{ctx.editor.line_of(call)} (partial sums, reduced by full_tensor/redistribute)")
        return
    raise CannotPatch(f"no DTensor.from_local of {variable} after line {ctx.change.line}")


def colwise_output_replicated(ctx: PatchContext) -> None:
    module = _module_of(ctx, producer(ctx.program, ctx.change.value))
    entry = plan_entry(ctx.editor, module, ("dtensor.ColwiseParallel",))
    replicate = cst.parse_expression(f"{_placement(ctx, 'Replicate')}()")
    ctx.editor.replace(entry, lambda node: with_keyword(node, "output_layouts", replicate))
    ctx.editor.notes.append(f"plan entry {module!r}: ColwiseParallel(output_layouts=Replicate()) (all-gather its output)")


def rowwise_input_replicated(ctx: PatchContext) -> None:
    consumers = [i for i, op in enumerate(ctx.program.ops) if ctx.change.value in op.args]
    if not consumers or ctx.change.attr_dict.get("dim") not in (-1, _last_dim(ctx)):
        raise CannotPatch("the chunked dim is not the input's last dim")
    module = _module_of(ctx, consumers[0])
    entry = plan_entry(ctx.editor, module, ("dtensor.RowwiseParallel",))
    replicate = cst.parse_expression(f"{_placement(ctx, 'Replicate')}()")
    ctx.editor.replace(entry, lambda node: with_keyword(node, "input_layouts", replicate))
    ctx.editor.notes.append(f"plan entry {module!r}: RowwiseParallel(input_layouts=Replicate()) (take this rank's "
                            f"slice of its replicated input)")


def _last_dim(ctx: PatchContext) -> int:
    return value_rank(ctx.program, ctx.change.value) - 1


def _single_step(kind: str):
    def test(change) -> bool:
        return change.action == "insert" and len(change.steps) == 1 and change.steps[0].kind == kind
    return test


RECIPES = (
    (_single_step("all_reduce"), from_local_partial),
    (_single_step("all_gather"), colwise_output_replicated),
    (_single_step("local_chunk"), rowwise_input_replicated),
)


# --- idioms recognised in the source ----------------------------------------------------------

NEEDS_WHOLE_ROW = ("softmax", "log_softmax", "layer_norm", "rms_norm", "normalize")


def local_output_into_row_op(source: str, path: str) -> Iterable[tuple[str, SourceEditor]]:
    """A ``ColwiseParallel()`` module whose local (sharded) output feeds an op over the last dim:
    keep the output a DTensor (``use_local_output=False``) so the op redistributes it."""
    editor = SourceEditor(source, path)
    for element in m.findall(editor.module, m.DictElement()):
        key = _string(element.key)
        if key is None or not isinstance(element.value, cst.Call) or \
                editor.resolve(element.value.func) != "dtensor.ColwiseParallel":
            continue
        local = argument(element.value, 99, "use_local_output")
        if local is not None and m.matches(local.value, m.Name("False")):
            continue
        pattern = m.Call(func=m.Attribute(attr=m.OneOf(*[m.Name(n) for n in NEEDS_WHOLE_ROW])) |
                         m.Name(m.MatchIfTrue(lambda name: name in NEEDS_WHOLE_ROW)),
                         args=[m.Arg(m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name(key)))),
                               m.ZeroOrMore()])
        if not m.findall(editor.module, pattern):
            continue
        fresh = SourceEditor(source, path)
        target = next(e.value for e in m.findall(fresh.module, m.DictElement()) if _string(e.key) == key)
        fresh.replace(target, lambda node: with_keyword(node, "use_local_output", cst.Name("False")))
        yield (f"keep the output of {key!r} a DTensor (use_local_output=False) so the op over its sharded dim "
               f"redistributes it", fresh)


DIRECT = (local_output_into_row_op,)
