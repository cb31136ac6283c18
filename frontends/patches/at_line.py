"""Candidate source edits at a line a traced run names: the repair space of recorded violations.

A traced violation says where the values first go wrong (the user's line) and which recorded
op did it (``aten.mm.default``, ``all_reduce``, ``aten.cat.default``...).  Each recipe below is
one way a person fixes communication at that line, spelled in the file's own idioms:

* ``reduce_after``    all-reduce the value the line computes: ``dist.all_reduce(y)``, the file's
                      Megatron mapping, the file's own reducing ``autograd.Function``, or the
                      autograd-aware ``torch.distributed.nn.functional.all_reduce``;
* ``copy_before``     the identity-forward / all-reduce-backward guard on an operand of the line
                      (Megatron's ``copy_to_tensor_model_parallel_region`` or the file's own);
* ``reduce_in_function`` a custom ``autograd.Function`` whose forward or backward lost its
                      collective: ``dist.all_reduce(g)`` before that method's return;
* ``remove_collective`` a duplicated collective on the line, deleted;
* ``remove_scaling`` / ``add_scaling``  a ``/ world_size`` removed from, or added to, the line;
* ``change_dim``      the dim of a ``cat``/``split``/``chunk``/``narrow``/``Shard(d)`` on the line
                      (inside an ``autograd.Function`` also its partner in the sibling method);
* more in ``collective_args``, ``region_functions``, ``masking``, ``seeding`` (a seed that adds
  the rank), ``buffers`` (a gather buffer no collective fills) and ``sequence_parallel`` (a norm's
  parameters not marked ``sequence_parallel``) and ``waits`` (an async handle dropped, never waited
  on, or waited on after its buffer is read) and ``positions`` (a shard's positions where a mask
  needs global ones: ``rank * chunk`` added) and ``partners`` (a send nobody receives or a receive
  nobody sends to gets its partner beside it) and ``p2p_order`` (sends and receives posted in another
  order than their partners: the loop over microbatches reordered) and ``global_size`` (a mean over a
  sharded dim divided by the rank's own share of it: ``/ (part * world)``).

Candidates are only text: each must be traced and verified again before it is shown
(``verify_agent.repair.traced_fixes``).  ``prior`` orders them (lower first) by how well the
recipe matches the recorded op.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator

import libcst as cst
import libcst.matchers as m

from ..source import dotted
from .editor import CannotPatch, SourceEditor, call_name, int_literal

COLLECTIVE_CALLS = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                    "all_to_all", "all_to_all_single", "broadcast", "reduce_from_tensor_model_parallel_region",
                    "gather_from_tensor_model_parallel_region", "reduce_scatter_to_sequence_parallel_region",
                    "gather_from_sequence_parallel_region")
MATMUL_OPS = ("mm", "addmm", "bmm", "matmul", "linear", "einsum", "baddbmm", "sum", "embedding", "mul")
LAYOUT_OPS = ("cat", "split", "chunk", "slice", "narrow", "stack", "split_with_sizes", "view", "reshape",
              "transpose", "permute", "select", "all_gather", "all_to_all")
SCALE_OPS = ("div", "mul", "true_divide", "scalar_tensor")
# call name -> (position of ``dim`` in the function form, in the method form)
DIM_CALLS = {"cat": (1, None), "concat": (1, None), "concatenate": (1, None), "stack": (1, None),
             "split": (2, 1), "chunk": (2, 1), "tensor_split": (2, 1), "narrow": (1, 0)}
PARTNER = {"cat": ("split", "chunk", "narrow", "tensor_split"), "chunk": ("cat", "concat"),
           "split": ("cat", "concat"), "narrow": ("cat", "concat"), "tensor_split": ("cat", "concat")}
WORLD_WORDS = re.compile(r"world|tp_size|size\(\)|num_ranks|nranks|n_ranks")
DIMS = (-1, 1, 0, 2)


@dataclass(frozen=True)
class Site:
    """Where a traced run first goes wrong: the user's line and the recorded op there."""

    line: int
    op: str = ""              # short op name: "mm", "all_reduce", "cat" ("aten.cat.default" -> "cat")
    gradient: bool = False    # the value that differs is a gradient
    guessed: bool = False     # not named by the run: a line of the file that communicates or lays out
    input: str = ""           # the entry input whose gradient differs ("gradient of w differs"), when named


@dataclass(frozen=True)
class Candidate:
    description: str
    patched: str
    prior: int
    recipe: str
    guessed: bool = False     # made at a guessed site (a communicating line), not one the run named


def short_op(name: str | None) -> str:
    """``aten.mm.default`` -> ``mm``; ``c10d.allreduce_.default`` -> ``all_reduce``; ``all_gather`` as is."""
    if not name:
        return ""
    parts = name.split(".")
    core = parts[1] if len(parts) > 1 and parts[0] in ("aten", "c10d", "_c10d_functional") else parts[0]
    core = core.rstrip("_")
    return {"allreduce": "all_reduce", "allgather": "all_gather", "alltoall": "all_to_all",
            "_allgather_base": "all_gather", "_reduce_scatter_base": "reduce_scatter"}.get(core, core)


# --- what the file already says ------------------------------------------------------------------

@dataclass(frozen=True)
class Idioms:
    """How this file spells its collectives."""

    group: str | None                 # the one ``group=`` expression its collectives use, if module-level
    mappings: str | None              # local spelling of megatron's mappings module (or None)
    reducers: tuple[str, ...]         # own autograd.Function classes: all-reduce forward, identity backward
    copiers: tuple[str, ...]          # own autograd.Function classes: identity forward, all-reduce backward
    functions: tuple[str, ...]        # every own autograd.Function class


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


def _has_collective(node: cst.CSTNode | None) -> bool:
    return node is not None and any(call_name(c) in COLLECTIVE_CALLS for c in m.findall(node, m.Call()))


def autograd_functions(module: cst.Module) -> list[cst.ClassDef]:
    return [c for c in m.findall(module, m.ClassDef())
            if any((dotted(b.value) or "").split(".")[-1] == "Function" for b in c.bases)]


def read_idioms(editor: SourceEditor) -> Idioms:
    module_names = set(editor.imports)
    for statement in editor.module.body:
        for target in m.findall(statement, m.AssignTarget()):
            if isinstance(target.target, cst.Name) and editor.function_of(target) is editor.module:
                module_names.add(target.target.value)
    groups = set()
    for call in m.findall(editor.module, m.Call()):
        if call_name(call) in COLLECTIVE_CALLS:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "group":
                    groups.add(editor.code(arg.value))
    group = next(iter(groups)) if len(groups) == 1 else None
    if group is not None and (dotted(cst.parse_expression(group)) or "").split(".")[0] not in module_names:
        group = None   # a local variable of some function: not usable elsewhere
    mappings = None
    for local, path in editor.imports.items():
        if path.endswith("tensor_parallel.mappings") and not local.startswith("*"):
            mappings = local
    reducers, copiers, functions = [], [], []
    for cls in autograd_functions(editor.module):
        forward, backward = _method(cls, "forward"), _method(cls, "backward")
        functions.append(cls.name.value)
        if _has_collective(forward) and not _has_collective(backward):
            reducers.append(cls.name.value)
        elif _has_collective(backward) and not _has_collective(forward):
            copiers.append(cls.name.value)
    return Idioms(group, mappings, tuple(reducers), tuple(copiers), tuple(functions))


# --- spellings ---------------------------------------------------------------------------------------

def _group_kw(idioms: Idioms) -> str:
    return f", group={idioms.group}" if idioms.group else ""


def reduce_spellings(editor: SourceEditor, idioms: Idioms, name: str) -> list[tuple[str, str, bool]]:
    """(label, statement, in place) ways to all-reduce ``name`` in this file, its own idioms first."""
    out = []
    if idioms.mappings:
        out.append(("the Megatron mapping", f"{name} = {idioms.mappings}.reduce_from_tensor_model_parallel_region"
                                            f"({name})", False))
    for cls in idioms.reducers:
        out.append((f"the file's {cls}", f"{name} = {cls}.apply({name})", False))
    if editor.imports_module("torch.distributed") or editor.alias("torch.distributed"):
        dist = editor.need("torch.distributed")
        out.append(("torch.distributed", f"{dist}.all_reduce({name}{_group_kw(idioms)})", True))
    torch = editor.alias("torch")
    if torch is not None:
        out.append(("autograd-aware torch.distributed.nn", f"{name} = {torch}.distributed.nn.functional.all_reduce"
                                                           f"({name}{_group_kw(idioms)})", False))
    return out


def copy_spellings(idioms: Idioms, code: str) -> list[tuple[str, str]]:
    out = []
    if idioms.mappings:
        out.append(("the Megatron mapping", f"{idioms.mappings}.copy_to_tensor_model_parallel_region({code})"))
    out += [(f"the file's {cls}", f"{cls}.apply({code})") for cls in idioms.copiers]
    return out


def _needs_nn_functional(text: str) -> bool:
    return "distributed.nn.functional" in text


def _render(editor: SourceEditor, uses_nn_functional: bool = False) -> str:
    if uses_nn_functional:
        editor._add_import_line("import torch.distributed.nn.functional")
    return editor.render()


# --- recipes -------------------------------------------------------------------------------------------

Recipe = Callable[[str, str, Site], Iterator[tuple[str, str, int]]]


def _statement(source: str, path: str, line: int) -> tuple[SourceEditor, cst.SimpleStatementLine]:
    editor = SourceEditor(source, path)
    return editor, editor.statement_at(line)


def _assigned(statement: cst.SimpleStatementLine) -> str | None:
    small = statement.body[0] if len(statement.body) == 1 else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value
    if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
        return small.target.value
    return None


def _returned(statement: cst.SimpleStatementLine) -> cst.Return | None:
    small = statement.body[0] if len(statement.body) == 1 else None
    return small if isinstance(small, cst.Return) and small.value is not None else None


def reduce_after(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    prior = 0 if site.op in MATMUL_OPS + ("partial",) and not site.gradient else 2
    editor, statement = _statement(source, path, site.line)
    idioms = read_idioms(editor)
    name = _assigned(statement)
    returned = _returned(statement)
    if name is None and returned is None:
        return
    for label, spelled, in_place in reduce_spellings(editor, idioms, name or "out"):
        editor, statement = _statement(source, path, site.line)
        if name is not None:
            editor.insert_after(statement, spelled)
            what = f"all-reduce `{name}` after line {site.line} ({label})"
        else:
            value = editor.code(_returned(statement).value)
            fresh = editor.fresh_name("out")
            spelled = spelled.replace("out", fresh)
            editor.insert_before(statement, f"{fresh} = {value}", *([spelled] if in_place else []))
            if not in_place:
                editor.insert_before(statement, spelled)
            editor.replace(_returned(statement).value, cst.Name(fresh))
            what = f"all-reduce the value returned on line {site.line} ({label})"
        yield what, _render(editor, _needs_nn_functional(spelled)), prior + (0 if label != "autograd-aware "
                                                                           "torch.distributed.nn" else 1)


def _operands(statement: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.Name]]:
    """The first operand of each matmul on the line (``x @ w``, ``F.linear(x, w)``), when it is a name."""
    out = []
    for node in m.findall(statement, m.BinaryOperation(operator=m.MatrixMultiply()) | m.Call()):
        if isinstance(node, cst.Call) and call_name(node) not in ("matmul", "mm", "linear", "bmm", "einsum"):
            continue
        first = node.left if isinstance(node, cst.BinaryOperation) else (node.args[0].value if node.args else None)
        if isinstance(first, cst.Name):
            out.append((node, first))
    return out


def copy_before(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    """Wrap an operand of the line in the identity-forward / all-reduce-backward guard."""
    editor, statement = _statement(source, path, site.line)
    idioms = read_idioms(editor)
    if not copy_spellings(idioms, "x"):
        return
    seen = set()
    for index, (_, operand) in enumerate(_operands(statement)):
        if operand.value in seen:
            continue
        seen.add(operand.value)
        for label, spelled in copy_spellings(idioms, operand.value):
            editor, statement = _statement(source, path, site.line)
            target = _operands(statement)[index][1]
            editor.replace(target, cst.parse_expression(spelled))
            yield (f"guard `{operand.value}` on line {site.line} with {label} (identity forward, all-reduce of "
                   f"its gradient)", editor.render(), 0 if site.gradient else 3)


def reduce_in_function(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    """``dist.all_reduce(g)`` before the return of an autograd.Function method without a collective."""
    editor = SourceEditor(source, path)
    idioms = read_idioms(editor)
    dist = editor.alias("torch.distributed")
    if dist is None:
        return
    for cls in autograd_functions(editor.module):
        start, end = editor.span(cls)
        lines = source.splitlines()
        on_line = start <= site.line <= end or f"{cls.name.value}.apply(" in lines[site.line - 1]
        near = on_line or any(f"{cls.name.value}.apply(" in line for line in lines[max(0, site.line - 2):site.line + 1])
        for method in ("forward", "backward"):
            function = _method(cls, method)
            if function is None or _has_collective(function):
                continue
            returns = [r for r in m.findall(function, m.Return()) if r.value is not None]
            if not returns:
                continue
            value = returns[-1].value
            name = value.value if isinstance(value, cst.Name) else (
                value.elements[0].value.value if isinstance(value, cst.Tuple) and value.elements
                and isinstance(value.elements[0].value, cst.Name) else None)
            if name is None:
                continue
            fresh = SourceEditor(source, path)
            fresh_cls = next(c for c in autograd_functions(fresh.module) if c.name.value == cls.name.value)
            fresh_returns = [r for r in m.findall(_method(fresh_cls, method), m.Return()) if r.value is not None]
            statement = fresh.parents[fresh_returns[-1]]
            fresh.insert_before(statement, f"{dist}.all_reduce({name}{_group_kw(idioms)})")
            # the file's own Function on the culprit's path, missing its collective in the method the
            # finding points at (forward for outputs, backward for gradients): the most specific guess
            prior = (-1 if on_line else 0) if site.gradient == (method == "backward") else 1 if near else 3
            prior = prior if near else 3
            # a copy (identity forward) or a reduction (identity backward) is whole as it is: its
            # identity method is the design, not a lost collective
            if (method == "forward" and cls.name.value in idioms.copiers) or \
                    (method == "backward" and cls.name.value in idioms.reducers):
                prior = 4
            yield (f"all-reduce `{name}` in {cls.name.value}.{method} before it returns (torch.distributed)",
                   fresh.render(), prior)


def remove_collective(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    prior = 0 if site.op in COLLECTIVE_CALLS or site.op.startswith(("all_", "reduce", "broadcast")) else 3
    editor, statement = _statement(source, path, site.line)
    small = statement.body[0] if len(statement.body) == 1 else None
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and call_name(small.value) in COLLECTIVE_CALLS:
        editor.remove(statement)
        yield f"remove the {call_name(small.value)} on line {site.line} (the value is reduced twice)", \
            editor.render(), prior
    elif isinstance(small, (cst.Assign, cst.Return)) and isinstance(small.value, cst.Call) and \
            call_name(small.value) in COLLECTIVE_CALLS and small.value.args:
        editor.replace(small.value, small.value.args[0].value)
        yield f"drop the {call_name(small.value)} on line {site.line} (the value is reduced twice)", \
            editor.render(), prior


def _is_world(editor: SourceEditor, node: cst.CSTNode) -> bool:
    return bool(WORLD_WORDS.search(editor.code(node)))


def _remove_with_empty_loop(editor: SourceEditor, statement: cst.CSTNode) -> None:
    """Remove ``statement``; a ``for`` loop left with nothing to do goes with it."""
    block = editor.block_of(statement)
    loop = editor.parents.get(block)
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1 and isinstance(loop, cst.For):
        editor.remove(loop)
    else:
        editor.remove(statement)


def remove_scaling(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    # a scaling by the world size on the very line where the values go wrong is strong evidence; one on
    # another line when the run went wrong at a scaling op (communicating_lines(scaling=True)) too
    prior = (-1 if site.guessed else 0) if site.op in SCALE_OPS else 0 if not site.guessed else 2
    editor, statement = _statement(source, path, site.line)
    small = statement.body[0] if len(statement.body) == 1 else None
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, (cst.DivideAssign, cst.MultiplyAssign)) \
            and _is_world(editor, small.value):
        _remove_with_empty_loop(editor, statement)
        yield f"remove the scaling by {editor.code(small.value)} on line {site.line}", editor.render(), prior
        return
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and call_name(small.value) in \
            ("div_", "mul_") and any(_is_world(editor, a.value) for a in small.value.args):
        _remove_with_empty_loop(editor, statement)
        yield f"remove the in-place scaling on line {site.line}", editor.render(), prior
        return
    for index, node in enumerate(m.findall(statement, m.BinaryOperation(operator=m.Divide() | m.Multiply()))):
        if not _is_world(editor, node.right):
            continue
        editor, statement = _statement(source, path, site.line)
        target = m.findall(statement, m.BinaryOperation(operator=m.Divide() | m.Multiply()))[index]
        editor.replace(target, target.left)
        yield (f"remove `{editor.code(target.operator).strip()} {editor.code(target.right)}` on line {site.line}",
               editor.render(), prior)


def _world_spelling(editor: SourceEditor, statement: cst.CSTNode, idioms: Idioms) -> str | None:
    scope = editor.function_of(statement)
    for where in (scope, editor.module):
        for assign in m.findall(where, m.Assign(targets=[m.AssignTarget(target=m.Name())])):
            name = assign.targets[0].target.value
            if (where is editor.module and editor.function_of(assign) is not editor.module) or \
                    editor.span(assign)[0] > editor.span(statement)[0] and where is scope:
                continue
            if re.search(r"world_size|get_world_size|size\(\)", editor.code(assign.value)) and \
                    WORLD_WORDS.search(name):
                return name
    dist = editor.alias("torch.distributed")
    return f"{dist}.get_world_size({idioms.group or ''})" if dist else None


def _reduced_in_place(statement: cst.SimpleStatementLine) -> str | None:
    """``dist.all_reduce(loss)``: the name an in-place all-reduce statement sums over the ranks."""
    small = statement.body[0] if len(statement.body) == 1 else None
    call = small.value if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) else None
    if call is None or call_name(call) != "all_reduce" or not call.args or call.args[0].keyword is not None:
        return None
    op = next((a.value for a in call.args[1:] if a.keyword is not None and a.keyword.value == "op"), None)
    if op is not None and not (dotted(op) or "").endswith("SUM"):   # an AVG divides already; a MAX is no sum
        return None
    return call.args[0].value.value if isinstance(call.args[0].value, cst.Name) else None


def add_scaling(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    """``y = y / world`` after a line that assigns ``y`` or all-reduces it in place (a sum where the
    single device's value is a mean), or the returned value divided."""
    editor, statement = _statement(source, path, site.line)
    world = _world_spelling(editor, statement, read_idioms(editor))
    name, returned = _assigned(statement) or _reduced_in_place(statement), _returned(statement)
    if world is None or (name is None and returned is None):
        return
    in_place = _assigned(statement) is None and name is not None
    prior = 1 if site.op in SCALE_OPS and not in_place else 3
    if name is not None:
        editor.insert_after(statement, f"{name} = {name} / {world}")
        yield f"divide `{name}` by {world} after line {site.line}", editor.render(), prior
        return
    value = returned.value
    if isinstance(value, cst.Tuple):
        return
    def divided(node: cst.BaseExpression) -> cst.BaseExpression:
        simple = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
        code = cst.Module([]).code_for_node(node.with_changes(lpar=[], rpar=[]) if simple else node)
        return cst.parse_expression(f"{code} / {world}" if simple else f"({code}) / {world}")

    editor.replace(value, divided)
    yield f"divide the value returned on line {site.line} by {world}", editor.render(), prior + 1


def _dim_arg(call: cst.Call, method: bool) -> tuple[int | None, cst.Arg | None]:
    name = call_name(call)
    position = DIM_CALLS[name][1 if method else 0]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("dim", "axis"):
            return None, arg
    if position is not None and len(call.args) > position and call.args[position].keyword is None:
        return position, call.args[position]
    return None, None


def _dim_calls(editor: SourceEditor, node: cst.CSTNode, names) -> list[tuple[cst.Call, cst.Arg, int]]:
    found = []
    for call in m.findall(node, m.Call()):
        name = call_name(call)
        if name not in names:
            continue
        method = isinstance(call.func, cst.Attribute) and not (editor.resolve(call.func.value) or "").startswith(
            "torch") and (dotted(call.func.value) or "") not in ("torch", editor.alias("torch") or "torch")
        position, arg = _dim_arg(call, method)
        if arg is None:
            if name in ("cat", "concat", "stack") and len(call.args) == 1:
                found.append((call, None, 0))    # default dim 0
            continue
        value = int_literal(arg.value)
        if value is not None:
            found.append((call, arg, value))
    return found


def _with_dim(call: cst.Call, arg: cst.Arg | None, dim: int) -> cst.Call:
    value = cst.parse_expression(str(dim))
    if arg is None:
        return call.with_changes(args=[*call.args[:-1], call.args[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(value, keyword=cst.Name("dim"), equal=cst.AssignEqual(cst.SimpleWhitespace(""),
                                                                            cst.SimpleWhitespace("")))])
    return call.with_changes(args=[a.with_changes(value=value) if a is arg else a for a in call.args])


def change_dim(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    prior = 0 if site.op in LAYOUT_OPS else 3
    editor, statement = _statement(source, path, site.line)
    calls = _dim_calls(editor, statement, DIM_CALLS)
    for index, (call, arg, old) in enumerate(calls):
        name = call_name(call)
        for new in DIMS:
            if new == old:
                continue
            editor, statement = _statement(source, path, site.line)
            this, this_arg, _ = _dim_calls(editor, statement, DIM_CALLS)[index]
            editor.replace(this, _with_dim(this, this_arg, new))
            single = editor.render()
            what = f"`{name}` on line {site.line}: dim {old} -> {new}"
            # inside an autograd.Function: the sibling method's inverse op moves with it (tried first)
            cls = editor.parents.get(editor.function_of(statement))
            cls = editor.parents.get(cls) if isinstance(cls, cst.IndentedBlock) else None
            partners = []
            if isinstance(cls, cst.ClassDef):
                mine = editor.function_of(statement)
                partners = [(c, a) for method in cls.body.body if isinstance(method, cst.FunctionDef)
                            and method is not mine for c, a, v in _dim_calls(editor, method, PARTNER.get(name, ()))
                            if v == old]
            if partners:
                for partner, partner_arg in partners:
                    editor.replace(partner, _with_dim(partner, partner_arg, new))
                yield f"{what}, and its inverse in {cls.name.value}'s other method", editor.render(), prior
            yield what, single, prior + (1 if partners else 0)


def shard_dim(source: str, path: str, site: Site) -> Iterator[tuple[str, str, int]]:
    """A DTensor placement on the line: ``Shard(d)`` <-> another dim or ``Replicate()``."""
    editor, statement = _statement(source, path, site.line)
    placements = [c for c in m.findall(statement, m.Call()) if call_name(c) in ("Shard", "Replicate")]
    for index, call in enumerate(placements):
        old = int_literal(call.args[0].value) if call_name(call) == "Shard" and call.args else None
        options = [f"Shard({d})" for d in (0, 1, -1) if d != old] + (["Replicate()"] if old is not None else [])
        for option in options:
            editor, statement = _statement(source, path, site.line)
            this = [c for c in m.findall(statement, m.Call()) if call_name(c) in ("Shard", "Replicate")][index]
            func = dotted(this.func) or ""
            prefix = func.rsplit(".", 1)[0] + "." if "." in func else ""
            editor.replace(this, cst.parse_expression(prefix + option))
            yield f"`{editor.code(this)}` on line {site.line} -> `{prefix}{option}`", editor.render(), 1


def _more_recipes() -> tuple[Recipe, ...]:
    from .collective_args import change_op, dim_keyword, unwrap_twice, wrap_mapping
    from .masking import mask_bounds, mask_ids
    from .region_functions import copy_region, guard_input, reduce_region
    from .buffers import fill_gather_buffer
    from .seeding import same_seed
    from .sequence_parallel import mark_sequence_parallel
    from .positions import global_positions
    from .waits import wait_before_read, wait_handles
    from .partners import add_partner
    from .p2p_order import match_order
    from .global_size import global_size
    from .detach_max import detach_max

    return (unwrap_twice, reduce_region, copy_region, guard_input, change_op, dim_keyword, mask_ids, mask_bounds,
            wrap_mapping, same_seed, fill_gather_buffer, mark_sequence_parallel, wait_handles, wait_before_read,
            global_positions, add_partner, match_order, global_size, detach_max)


RECIPES: tuple[Recipe, ...] = (reduce_after, copy_before, reduce_in_function, remove_collective, remove_scaling,
                               add_scaling, change_dim, shard_dim)


def _scales_by_world(editor: SourceEditor, statement: cst.SimpleStatementLine) -> bool:
    """``x / world``, ``x /= world``, ``x.div_(world)`` (and ``*``) on the statement."""
    for node in m.findall(statement, m.BinaryOperation(operator=m.Divide() | m.Multiply()) |
                          m.AugAssign(operator=m.DivideAssign() | m.MultiplyAssign())):
        if _is_world(editor, node.right if isinstance(node, cst.BinaryOperation) else node.value):
            return True
    return any(call_name(c) in ("div_", "mul_", "div", "mul") and any(_is_world(editor, a.value) for a in c.args)
               for c in m.findall(statement, m.Call()))


def _applied_twice(editor: SourceEditor, call: cst.Call) -> bool:
    """``f(f(x))`` for an ``autograd.Function``'s ``apply`` or a Megatron-style mapping."""
    inner = call.args[0].value if len(call.args) == 1 else None
    if not isinstance(inner, cst.Call) or editor.code(inner.func) != editor.code(call.func):
        return False
    return call_name(call) == "apply" or call_name(call).endswith("_region")


def communicating_lines(source: str, path: str, scaling: bool = False) -> list[Site]:
    """Lines of the file with a collective, a dim-carrying layout call or a placement: where a run's
    culprit line does not show the bug (a view hides a wrong gather dim), it is usually on one.
    Also a line applying a communicating call to its own result (``Copy.apply(Copy.apply(x))``: the
    run goes wrong inside the Function's backward, not at the line that called it twice).
    With ``scaling`` (the run went wrong at a scaling op) also the lines that scale by the world size:
    a value divided twice goes wrong where the second division is read, not where it is made.
    No lines when libcst cannot read the file (no edit could be written there either)."""
    try:
        editor = SourceEditor(source, path)
    except CannotPatch:
        return []
    sites: dict[int, Site] = {}
    for call in m.findall(editor.module, m.Call()):
        name = call_name(call)
        if name in COLLECTIVE_CALLS or name in DIM_CALLS or name == "Shard" or _applied_twice(editor, call):
            line = editor.line_of(call)
            sites.setdefault(line, Site(line, name if name in LAYOUT_OPS or name in COLLECTIVE_CALLS else "",
                                        guessed=True))
    if scaling:
        for statement in m.findall(editor.module, m.SimpleStatementLine()):
            if _scales_by_world(editor, statement):
                line = editor.line_of(statement)
                sites[line] = Site(line, "div", guessed=True)
    return [sites[line] for line in sorted(sites)]


# the recipes that answer the kind of op a run names at its culprit line: tried first (the rest follow
# in their prior order); a division at a collective's line is the collective's own (gloo's AVG)
AFFINITY = {
    "collective": ("change_op", "remove_collective", "dim_keyword", "unwrap_twice", "wrap_mapping"),
    "scale": ("remove_scaling", "add_scaling", "global_size", "change_op", "remove_collective"),
    "matmul": ("guard_input", "reduce_after", "copy_before", "reduce_in_function", "reduce_region", "copy_region"),
    "layout": ("change_dim", "shard_dim", "dim_keyword"),
    "embedding": ("mask_ids", "mask_bounds", "reduce_after", "reduce_region"),
    "wait": ("wait_before_read", "wait_handles"),
    "p2p": ("add_partner",),
    "deadlock": ("match_order", "add_partner"),
}


def op_kind(op: str) -> str:
    """The recorded op's kind for ``AFFINITY``: collective, scale, embedding, wait, matmul, layout or ""."""
    if op in COLLECTIVE_CALLS or op.startswith(("all_", "reduce_scatter", "broadcast")):
        return "collective"
    if op in ("embedding", "wait", "p2p", "deadlock"):
        return op
    if op in SCALE_OPS and op != "mul":
        return "scale"
    if op in MATMUL_OPS or op == "partial":
        return "matmul"
    return "layout" if op in LAYOUT_OPS else ""


def _affine(recipe: str, site: Site) -> bool:
    return not site.guessed and recipe in AFFINITY.get(op_kind(site.op), ())


def candidates(source: str, path: str, sites: list[Site], limit: int = 24) -> list[Candidate]:
    """Every recipe at every site, distinct patched texts (at most ``limit``): first the recipes that
    answer the op named at a culprit line (``AFFINITY``), then the others, each group best prior first."""
    found: dict[str, Candidate] = {}
    affine: set[str] = set()
    for rank, site in enumerate(sites):
        for recipe in RECIPES + _more_recipes():
            try:
                for description, patched, prior in recipe(source, path, site):
                    if patched != source and patched not in found:
                        found[patched] = Candidate(description, patched, prior * 10 + rank + 15 * site.guessed,
                                                   recipe.__name__, site.guessed)
                        if _affine(recipe.__name__, site):
                            affine.add(patched)
            except (CannotPatch, cst.ParserSyntaxError, ValueError, KeyError, IndexError, StopIteration):
                continue
    return sorted(found.values(), key=lambda c: (c.patched not in affine, c.prior))[:limit]
