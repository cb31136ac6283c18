"""Source recipes for plain ``torch.distributed`` code.

One recipe per kind of IR change, written the way a person would write the fix:
``dist.all_reduce(y)`` after the line that computes ``y``; the all-gather idiom
(``parts = [...]; dist.all_gather(parts, y); y = torch.cat(parts, dim=d)``); ``op=`` of an
existing collective; the ``dim=`` of the ``torch.cat`` that assembles a gather; deleting a
collective's line; moving ``work.wait()``.  A recipe that cannot spell the change faithfully
raises ``CannotPatch``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst
import libcst.matchers as m

from verifier.ir import Program
from verifier.synthesis.edits import Change, Step

from .editor import CannotPatch, SourceEditor
from .locate import Named, base_name, hoist, locate, producer

REDUCE_OP_NAMES = {"sum": "SUM", "avg": "AVG", "max": "MAX", "min": "MIN"}
GATHER_CALLS = ("dist.all_gather", "dist.all_gather_into_tensor")
REDUCE_CALLS = ("dist.all_reduce", "dist.reduce_scatter", "dist.reduce_scatter_tensor")


@dataclass
class PatchContext:
    editor: SourceEditor
    program: Program  # the program the change applies to
    change: Change
    synthetic: frozenset[str] = frozenset()  # values added by earlier changes of the same fix

    @property
    def dist(self) -> str:
        return self.editor.need("torch.distributed")

    @property
    def torch(self) -> str:
        return self.editor.need("torch")

    def group_kw(self, mesh_dim: str | None = None) -> str:
        """``, group=G`` as the file spells the process group of this mesh dim (nothing for the default)."""
        mesh_dim = mesh_dim or self.change.mesh_dim
        for op in self.program.ops:
            if op.attr("mesh_dim") != mesh_dim or op.span.line is None or op.kind == "local_chunk":
                continue
            try:
                statement = self.editor.statement_at(op.span.line)
            except CannotPatch:
                continue
            for call in self.editor.calls_in(statement):
                name = self.editor.resolve(call.func) or ""
                if not name.startswith("dist."):
                    continue
                group = next((a for a in call.args if a.keyword is not None and a.keyword.value == "group"), None)
                if group is not None:
                    return f", group={self.editor.code(group.value)}"
                if name in REDUCE_CALLS + GATHER_CALLS:
                    return ""  # the file uses the default group for this mesh dim
        if len(self.program.mesh.dims) == 1:
            return ""
        raise CannotPatch(f"no process group of mesh dim {mesh_dim} to copy from the file")

    def group_arg(self) -> str:
        kw = self.group_kw()
        return kw[2:] if kw else ""

    def world(self) -> str:
        return f"{self.dist}.get_world_size({self.group_arg()})"

    def op_kw(self, op: str | None) -> str:
        if op in (None, "sum"):
            return ""
        return f", op={self.dist}.ReduceOp.{REDUCE_OP_NAMES[op]}"


# --- finding collectives on a line ----------------------------------------------------------------

def collective_calls(ctx: PatchContext, line: int | None, names: tuple[str, ...]
                     ) -> list[tuple[cst.Call, cst.SimpleStatementLine]]:
    statement = ctx.editor.statement_at(line)
    return [(call, statement) for call in ctx.editor.calls_in(statement) if ctx.editor.resolve(call.func) in names]


def one_call(ctx: PatchContext, line: int | None, names: tuple[str, ...]) -> tuple[cst.Call, cst.SimpleStatementLine]:
    found = collective_calls(ctx, line, names)
    if len(found) != 1:
        raise CannotPatch(f"expected one of {', '.join(names)} on line {line}, found {len(found)}")
    return found[0]


def argument(call: cst.Call, position: int, keyword: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    return positional[position] if position < len(positional) else None


def with_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression, position: int | None = None) -> cst.Call:
    """``call`` with ``keyword=value`` (replacing the keyword or the positional argument it names)."""
    args = list(call.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            args[index] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    positional = [i for i, a in enumerate(args) if a.keyword is None and a.star == ""]
    if position is not None and position < len(positional):
        args[positional[position]] = args[positional[position]].with_changes(value=value)
        return call.with_changes(args=args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(value=value, keyword=cst.Name(keyword),
                        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                              whitespace_after=cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


def without_keyword(call: cst.Call, keyword: str) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == keyword)]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def _name_of(node: cst.BaseExpression | None) -> str | None:
    return node.value if isinstance(node, cst.Name) else None


def arg_name(call: cst.Call, position: int, keyword: str) -> str | None:
    arg = argument(call, position, keyword)
    return _name_of(arg.value) if arg is not None else None


def _cat_of(ctx: PatchContext, statement: cst.SimpleStatementLine, parts: str) -> cst.Call:
    """The ``torch.cat(parts, ...)`` (or ``torch.stack``) that assembles a gathered list."""
    for later in ctx.editor.statements_after(statement):
        for call in ctx.editor.calls_in(later):
            first = argument(call, 0, "tensors")
            if ctx.editor.resolve(call.func) in ("torch.cat", "torch.concat", "torch.concatenate") and \
                    first is not None and _name_of(first.value) == parts:
                return call
    raise CannotPatch(f"no torch.cat of {parts} after line {ctx.editor.line_of(statement)}")


def _list_statement(ctx: PatchContext, statement: cst.SimpleStatementLine, name: str) -> cst.SimpleStatementLine | None:
    """The statement before ``statement`` that creates the list ``name`` (``parts = [...]``)."""
    scope = ctx.editor.function_of(statement)
    start = ctx.editor.span(statement)[0]
    best = None
    for candidate in m.findall(scope, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name(name))])])):
        if ctx.editor.span(candidate)[0] < start:
            best = candidate
    return best


def _uses(ctx: PatchContext, name: str, skip: set) -> int:
    count = 0
    for node in m.findall(ctx.editor.module, m.Name(name)):
        current, skipped = node, False
        while current is not None:
            if current in skip:
                skipped = True
                break
            current = ctx.editor.parents.get(current)
        count += not skipped
    return count


def _drop_gather_list(ctx: PatchContext, gather_statement, parts: str, cat: cst.Call, replacement: str) -> None:
    """Replace ``torch.cat(parts)`` by ``replacement`` and delete the now unused list."""
    ctx.editor.replace(cat, cst.parse_expression(replacement))
    creator = _list_statement(ctx, gather_statement, parts)
    if creator is not None and _uses(ctx, parts, {creator, gather_statement, cat}) == 0:
        ctx.editor.remove(creator)


# --- inserted collectives ----------------------------------------------------------------------

def _named(ctx: PatchContext, value: str) -> Named:
    located = locate(ctx.editor, ctx.program, value, ctx.synthetic)
    index = producer(ctx.program, value)
    base = "partial" if ctx.program.ops[index].kind in ("matmul", "linear") else f"{ctx.program.ops[index].kind}_out"
    named = hoist(ctx.editor, located, base)
    if ctx.change.target_line is not None:  # just before one consumer
        if named.hoisted:
            raise CannotPatch("the value is an unnamed sub-expression")
        consumer = ctx.editor.statement_at(ctx.change.target_line)
        rebound = [op for op in ctx.program.ops[index + 1:] if any(base_name(r) == named.name for r in op.results)
                   and (op.span.line or 0) < ctx.change.target_line]
        if rebound:
            raise CannotPatch(f"{named.name} is re-assigned before line {ctx.change.target_line}")
        return Named(named.name, consumer, True)
    return named


def _emit_step(ctx: PatchContext, named: Named, step: Step) -> list[str]:
    attrs = step.attr_dict
    dist, name, group = ctx.dist, named.name, ctx.group_kw()
    if step.kind == "all_reduce":
        return [f"{dist}.all_reduce({name}{ctx.op_kw(attrs.get('op'))}{group})"]
    if step.kind == "all_gather":
        parts = ctx.editor.fresh_name(f"{name}_parts")
        return [f"{parts} = [{ctx.torch}.empty_like({name}) for _ in range({ctx.world()})]",
                f"{dist}.all_gather({parts}, {name}{group})",
                f"{name} = {ctx.torch}.cat({parts}, dim={attrs.get('dim', 0)})"]
    if step.kind == "reduce_scatter":
        shard = ctx.editor.fresh_name(f"{name}_shard")
        dim = attrs.get("dim", 0)
        return [f"{shard} = {ctx.torch}.empty_like({name}.chunk({ctx.world()}, dim={dim})[0])",
                f"{dist}.reduce_scatter({shard}, list({name}.chunk({ctx.world()}, dim={dim}))"
                f"{ctx.op_kw(attrs.get('op'))}{group})",
                f"{name} = {shard}"]
    if step.kind == "all_to_all":
        sent, got = ctx.editor.fresh_name(f"{name}_send"), ctx.editor.fresh_name(f"{name}_recv")
        return [f"{sent} = list({name}.chunk({ctx.world()}, dim={attrs['split_dim']}))",
                f"{got} = [{ctx.torch}.empty_like(piece) for piece in {sent}]",
                f"{dist}.all_to_all({got}, {sent}{group})",
                f"{name} = {ctx.torch}.cat({got}, dim={attrs['concat_dim']})"]
    if step.kind == "local_chunk":
        return [f"{name} = {name}.chunk({ctx.world()}, dim={attrs['dim']})[{dist}.get_rank({ctx.group_arg()})]"]
    raise CannotPatch(f"no spelling for an inserted {step.kind}")


def insert(ctx: PatchContext) -> None:
    named = _named(ctx, ctx.change.value)
    kinds = tuple(step.kind for step in ctx.change.steps)
    if kinds == ("reshape", "all_gather", "sum"):  # gather the partial values and add them up
        parts = ctx.editor.fresh_name(f"{named.name}_parts")
        named.emit(ctx.editor, f"{parts} = [{ctx.torch}.empty_like({named.name}) for _ in range({ctx.world()})]",
                   f"{ctx.dist}.all_gather({parts}, {named.name}{ctx.group_kw()})",
                   f"{named.name} = {ctx.torch}.stack({parts}).sum(dim=0)")
        return
    code = [line for step in ctx.change.steps for line in _emit_step(ctx, named, step)]
    named.emit(ctx.editor, *code)


# --- changed collectives -----------------------------------------------------------------------

def change_op(ctx: PatchContext) -> None:
    call, _ = one_call(ctx, ctx.change.line, REDUCE_CALLS)
    new = ctx.change.attr_dict.get("op", "sum")
    current = argument(call, 1 if ctx.editor.resolve(call.func) == "dist.all_reduce" else 2, "op")
    if current is not None and isinstance(current.value, cst.Attribute):
        ctx.editor.replace(current.value.attr, cst.Name(REDUCE_OP_NAMES[new]))
        return
    op = cst.parse_expression(f"{ctx.dist}.ReduceOp.{REDUCE_OP_NAMES[new]}")
    ctx.editor.replace(call, lambda node: with_keyword(node, "op", op))


def change_gather_dim(ctx: PatchContext) -> None:
    call, statement = one_call(ctx, ctx.change.line, GATHER_CALLS)
    dim = ctx.change.attr_dict.get("dim", 0)
    if ctx.editor.resolve(call.func) == "dist.all_gather":
        parts = arg_name(call, 0, "tensor_list")
        if parts is None:
            raise CannotPatch("the gathered list is not a variable")
        cat = _cat_of(ctx, statement, parts)
        ctx.editor.replace(cat, lambda node: with_keyword(node, "dim", cst.Integer(str(dim)), position=1))
        return
    out = arg_name(call, 0, "output_tensor")
    if out is None:
        raise CannotPatch("the gather's output buffer is not a variable")
    ctx.editor.insert_after(statement, f"{out} = {ctx.torch}.cat({out}.chunk({ctx.world()}, dim=0), dim={dim})")


def change_scatter_dim(ctx: PatchContext) -> None:
    call, _ = one_call(ctx, ctx.change.line, ("dist.reduce_scatter",))
    inputs = argument(call, 1, "input_list")
    chunks = [c for c in ctx.editor.calls_in(inputs.value) if m.matches(c.func, m.Attribute(attr=m.Name("chunk")))]
    if len(chunks) != 1:
        raise CannotPatch("the scattered list is not written as x.chunk(world, dim=d)")
    dim = cst.Integer(str(ctx.change.attr_dict["dim"]))
    ctx.editor.replace(chunks[0], lambda node: with_keyword(node, "dim", dim, position=1))


def gather_to_reduce(ctx: PatchContext) -> None:
    """all_gather(+cat) of partial sums -> all_reduce of the tensor."""
    call, statement = one_call(ctx, ctx.change.line, GATHER_CALLS)
    tensor = argument(call, 1, "tensor" if ctx.editor.resolve(call.func) == "dist.all_gather" else "input_tensor")
    name = _name_of(tensor.value) if tensor is not None else None
    if name is None:
        raise CannotPatch("the gathered tensor is not a variable")
    reduce = cst.parse_expression(f"{ctx.dist}.all_reduce({name}{ctx.op_kw(ctx.change.attr_dict.get('op'))}"
                                  f"{ctx.group_kw()})")
    ctx.editor.replace(call, reduce)
    if ctx.editor.resolve(call.func) == "dist.all_gather":
        parts = arg_name(call, 0, "tensor_list")
        _drop_gather_list(ctx, statement, parts, _cat_of(ctx, statement, parts), name)
    else:
        out = arg_name(call, 0, "output_tensor")
        ctx.editor.insert_after(statement, f"{out} = {name}")


def reduce_to_gather(ctx: PatchContext) -> None:
    call, statement = one_call(ctx, ctx.change.line, ("dist.all_reduce",))
    name = arg_name(call, 0, "tensor")
    if name is None or len(statement.body) != 1 or not isinstance(statement.body[0], cst.Expr):
        raise CannotPatch("the all_reduce is not a statement on a variable")
    parts = ctx.editor.fresh_name(f"{name}_parts")
    ctx.editor.insert_after(statement, f"{parts} = [{ctx.torch}.empty_like({name}) for _ in range({ctx.world()})]",
                            f"{ctx.dist}.all_gather({parts}, {name}{ctx.group_kw()})",
                            f"{name} = {ctx.torch}.cat({parts}, dim={ctx.change.attr_dict.get('dim', 0)})")
    ctx.editor.remove(statement)


# --- removed collectives, waits --------------------------------------------------------------------

def _handle_waits(ctx: PatchContext, statement: cst.SimpleStatementLine) -> list[cst.SimpleStatementLine]:
    small = statement.body[0]
    if not (isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name)):
        return []
    handle = small.targets[0].target.value
    return [later for later in ctx.editor.statements_after(statement)
            if m.matches(later, m.SimpleStatementLine(body=[m.Expr(m.Call(func=m.Attribute(m.Name(handle),
                                                                                       m.Name("wait"))))]))]


def remove(ctx: PatchContext) -> None:
    if ctx.change.kind == "all_gather":
        call, statement = one_call(ctx, ctx.change.line, ("dist.all_gather",))
        parts = arg_name(call, 0, "tensor_list")
        name = arg_name(call, 1, "tensor")
        if parts is None or name is None:
            raise CannotPatch("the gather is not written on variables")
        ctx.editor.remove(statement)
        _drop_gather_list(ctx, statement, parts, _cat_of(ctx, statement, parts), name)
        return
    call, statement = one_call(ctx, ctx.change.line, ("dist.all_reduce", "dist.broadcast"))
    if len(statement.body) != 1 or statement.body[0].value is not call:
        raise CannotPatch("the collective is part of a larger statement")
    ctx.editor.remove(statement)
    for wait in _handle_waits(ctx, statement)[:1]:
        ctx.editor.remove(wait)


def move_wait(ctx: PatchContext) -> None:
    statement = ctx.editor.statement_at(ctx.change.line)
    if not any(m.matches(c.func, m.Attribute(attr=m.Name("wait"))) for c in ctx.editor.calls_in(statement)):
        raise CannotPatch(f"no .wait() on line {ctx.change.line}")
    target = ctx.editor.statement_at(ctx.change.target_line)
    ctx.editor.remove(statement)
    ctx.editor.insert_before(target, ctx.editor.code(statement).strip())


def insert_wait(ctx: PatchContext) -> None:
    issuer = ctx.editor.statement_at(ctx.change.line)
    small = issuer.body[0]
    if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name):
        handle = small.targets[0].target.value
    elif isinstance(small, cst.Expr):
        handle = ctx.editor.fresh_name("work")
        ctx.editor.replace(issuer, cst.parse_statement(f"{handle} = {ctx.editor.code(small.value)}"))
    else:
        raise CannotPatch("the async collective's handle cannot be named")
    if ctx.change.target_line is None:
        raise CannotPatch("no statement to wait before")
    ctx.editor.insert_before(ctx.editor.statement_at(ctx.change.target_line), f"{handle}.wait()")


# --- the table -----------------------------------------------------------------------------------

def _is(action: str, kind: str | None = None, old_kind: str | None = None,
        changed: str | None = None) -> Callable[[Change], bool]:
    def test(change: Change) -> bool:
        if change.action != action or (kind is not None and change.kind != kind):
            return False
        if old_kind is not None and change.old_kind != old_kind:
            return False
        if changed is not None and change.attr_dict.get(changed) == change.old_attr_dict.get(changed):
            return False
        return True

    return test


Recipe = tuple[Callable[[Change], bool], Callable[[PatchContext], None]]

RECIPES: tuple[Recipe, ...] = (
    (_is("insert"), insert),
    (_is("change", kind="all_reduce", old_kind="all_gather"), gather_to_reduce),
    (_is("change", kind="all_gather", old_kind="all_reduce"), reduce_to_gather),
    (_is("change", kind="all_reduce", old_kind="all_reduce", changed="op"), change_op),
    (_is("change", kind="reduce_scatter", old_kind="reduce_scatter", changed="op"), change_op),
    (_is("change", kind="all_gather", old_kind="all_gather", changed="dim"), change_gather_dim),
    (_is("change", kind="reduce_scatter", old_kind="reduce_scatter", changed="dim"), change_scatter_dim),
    (_is("remove"), remove),
    (_is("move_wait"), move_wait),
    (_is("insert_wait"), insert_wait),
)
