"""Reads the entry's body statement by statement and emits IR ops (an abstract interpreter).

Python-level control flow is executed (helper functions and methods are inlined, loops with
static bounds unrolled, ``if`` on sizes decided with the file's values); tensors become IR
values.  Control flow on the rank becomes ``when=`` conditions on the ops of each branch.
Anything else is an ``UnsupportedError`` naming the line and the construct.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import libcst as cst
import sympy as sp

from .sizes import to_sym
from .builder import Builder
from .library import CONSTANTS, FUNCTIONS, LAYERS, METHODS, OBJECT_METHODS, Call
from .ops import Emitter
from .source import SourceFile, canonical, read_import
from .symbolic import Dims
from .values import (MISSING, AutogradCtx, BoundMethod, BufferList, ClassObj, ConfigObj, FunctionObj, Handle,
                     HandleList, MaxResult, MeshObj, ModuleObj, QualName, Tensor, UnsupportedError, UserError,
                     WorldPieces)

MAX_DEPTH = 64
MAX_UNROLLED_ITERATIONS = 100_000  # per loop; measured before unrolling
_INPUT_CREATORS = {f"torch.{n}" for n in ("randn", "rand", "zeros", "ones", "empty", "randint")}


def _ends_in_return(block) -> bool:
    statements = getattr(block, "body", ())
    last = statements[-1] if statements else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in last.body)


def _returns_early(statement) -> bool:
    """An `if` without `else` whose body ends in `return`."""
    return isinstance(statement, cst.If) and statement.orelse is None and _ends_in_return(statement.body)


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


@dataclass
class RankCondition:
    """A Python condition that depends on the rank (sympy boolean over rank symbols)."""

    expr: Any


@dataclass(frozen=True)
class RankOnly:
    """``value if <rank condition> else None``: the value exists only on the ranks where
    ``condition`` holds (elsewhere it is None).  Kept as such so that an API with a per-rank
    rule (``scatter_list`` on the source rank only) can check it; anything else rejects it."""

    value: Any
    condition: Any


class Scope:
    def __init__(self, parent: "Scope | None", module: "ModuleScope"):
        self.vars: dict[str, Any] = {}
        self.parent = parent
        self.module = module

    def lookup(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        return self.module.lookup(name)


class ModuleScope:
    """The file's globals, evaluated on first use."""

    def __init__(self, it: "Interpreter"):
        self.it = it
        self.cache: dict[str, Any] = {}
        self.busy: set[str] = set()
        self.root = Scope(None, self)

    def lookup(self, name: str) -> Any:
        if name in self.cache:
            return self.cache[name]
        source = self.it.source
        if name in self.busy:
            raise UnsupportedError(None, name, "is defined in terms of itself")
        self.busy.add(name)
        try:
            if name in source.functions:
                value: Any = FunctionObj(source.functions[name], self.root)
            elif name in source.classes:
                value = self.it.make_class(source.classes[name], self.root)
            elif name in source.assignments:
                value = self.it.module_constant(name, *source.assignments[name])
            elif name in source.imports:
                value = QualName(source.imports[name])
            elif name in BUILTINS:
                value = BUILTINS[name]
            else:
                raise KeyError(name)
        finally:
            self.busy.discard(name)
        self.cache[name] = value
        return value


@dataclass
class SuperObj:
    cls: ClassObj
    instance: Any


@dataclass
class Builtin:
    name: str


BUILTINS = {name: Builtin(name) for name in (
    "range", "len", "list", "tuple", "int", "float", "min", "max", "sum", "abs", "zip", "enumerate", "isinstance",
    "print", "super", "dict", "getattr", "hasattr", "setattr", "slice", "reversed", "round", "bool", "str", "any",
    "all", "sorted", "iter", "next", "type", "object", "Exception", "ValueError", "RuntimeError", "AssertionError",
    "NotImplementedError", "map")}
BUILTINS["math"] = QualName("math")


@dataclass
class Interpreter(Emitter):
    source: SourceFile
    builder: Builder
    dims: Dims
    notes: list[str] = field(default_factory=list)
    backward_bodies: list[Any] = field(default_factory=list)
    depth: int = 0
    loss_parallel: bool = False
    hint: str | None = None
    handles: dict[str, Handle] = field(default_factory=dict)
    seen_notes: set[str] = field(default_factory=set)
    rank_facts: list = field(default_factory=list)  # rank conditions known to hold where code is read
    # (line, reason): world-size conditions decided for the mesh that go the other way at world
    # size 1, so the single-device reference built here is not what the file does on one rank
    reference_caveats: list = field(default_factory=list)
    executed_lines: set = field(default_factory=set)  # lines of library calls the interpreter ran
    untranslated_backwards: list = field(default_factory=list)  # (line, reason): custom backwards not read
    returning_branches: int = 0  # inside rank branches that both end in `return`
    input_mode: bool = False
    uses_custom_backward: bool = False
    megatron_autograd: bool = False  # Megatron layers/mappings: autograd-aware communication
    param_inputs: list = field(default_factory=list)  # (IR name, parameter tensor) in creation order
    return_line: int | None = None  # the entry's return statement
    current_line: int | None = None  # the statement being read (for internal errors)

    def __post_init__(self) -> None:
        self.globals = ModuleScope(self)

    # -- helpers ------------------------------------------------------------------------
    def line(self, node: cst.CSTNode | None) -> int | None:
        return self.source.line(node) if node is not None else None

    def note(self, text: str) -> None:
        if text not in self.seen_notes:
            self.seen_notes.add(text)
            self.notes.append(text)

    def unsupported(self, node: cst.CSTNode | None, construct: str | None, reason: str) -> UnsupportedError:
        if construct is None and node is not None:
            construct = self.source.code(node).strip().splitlines()[0][:60]
        return UnsupportedError(self.line(node), construct or "?", reason)

    # -- module level -------------------------------------------------------------------
    def module_constant(self, name: str, node: cst.BaseExpression, line: int | None, index: int | None) -> Any:
        if index is None and _int_literal(node) is not None:
            return self.dims.constant(name, _int_literal(node))
        value = self.eval(node, self.globals.root)
        if index is not None:
            try:
                value = list(value)[index]
            except TypeError:
                raise UnsupportedError(line, name, "cannot unpack this module-level value") from None
        return value

    def make_class(self, node: cst.ClassDef, scope: Scope) -> ClassObj:
        bases = tuple(self.eval(arg.value, scope) for arg in node.bases if arg.keyword is None)
        return ClassObj(node, scope, bases)

    # -- statements ---------------------------------------------------------------------
    def exec_block(self, body, scope: Scope) -> None:
        statements = list(body.body if hasattr(body, "body") and not isinstance(body, (list, tuple)) else body)
        for index, statement in enumerate(statements):
            rest = statements[index + 1:]
            if rest and _returns_early(statement):
                # `if c: ...; return a` then more code is `if c: ...; return a` `else: <more code>`:
                # with a condition on the rank, both branches return and their values are merged.
                combined = statement.with_changes(orelse=cst.Else(body=cst.IndentedBlock(body=rest)))
                self.source.positions[combined] = self.source.positions.get(statement)
                self.exec_statement(combined, scope)
                return
            self.exec_statement(statement, scope)

    def exec_statement(self, statement: cst.CSTNode, scope: Scope) -> None:
        self.current_line = self.line(statement)
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                self.exec_small(small, scope)
        elif isinstance(statement, cst.If):
            self.exec_if(statement, scope)
        elif isinstance(statement, cst.For):
            self.exec_for(statement, scope)
        elif isinstance(statement, cst.With):
            self.exec_with(statement, scope)
        elif isinstance(statement, cst.FunctionDef):
            scope.vars[statement.name.value] = FunctionObj(statement, scope)
        elif isinstance(statement, cst.ClassDef):
            scope.vars[statement.name.value] = self.make_class(statement, scope)
        elif isinstance(statement, cst.While):
            raise self.unsupported(statement, "while", "loops without static bounds are not modelled")
        elif isinstance(statement, cst.Try):
            raise self.unsupported(statement, "try", "exception handling is not modelled")
        else:
            raise self.unsupported(statement, type(statement).__name__, "statement not modelled")

    def exec_small(self, small: cst.CSTNode, scope: Scope) -> None:
        if isinstance(small, cst.Expr):
            if isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)):
                return  # docstring
            self.hint = None
            self.eval(small.value, scope)
        elif isinstance(small, cst.Assign):
            self.hint = _hint(small.targets[0].target) if len(small.targets) == 1 else None
            value = self.eval(small.value, scope)
            self.hint = None
            for target in small.targets:
                self.assign(target.target, value, scope, small)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.hint = _hint(small.target)
                value = self.eval(small.value, scope)
                self.hint = None
                self.assign(small.target, value, scope, small)
        elif isinstance(small, cst.AugAssign):
            self.exec_augassign(small, scope)
        elif isinstance(small, cst.Return):
            value = self.eval(small.value, scope) if small.value is not None else None
            if self.builder.when and not self.returning_branches:
                raise self.unsupported(small, "return", "returning inside a branch on the rank is not modelled")
            if self.depth == 1:
                self.return_line = self.line(small)
            raise _Return(value)
        elif isinstance(small, (cst.Pass, cst.Assert)):
            return
        elif isinstance(small, cst.Del):
            return
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            imports: dict[str, str] = {}
            read_import(small, imports, [])
            for local, path in imports.items():
                scope.vars[local] = QualName(path)
        elif isinstance(small, cst.Raise):
            raise self.unsupported(small, "raise", "the program raises an exception on this path")
        else:
            raise self.unsupported(small, type(small).__name__, "statement not modelled")

    def assign(self, target: cst.BaseExpression, value: Any, scope: Scope, node: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            if isinstance(value, Tensor):
                self.builder.name_result(value, target.value)
            scope.vars[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            items = self.unpack(value, len(target.elements), target)
            starred = [i for i, e in enumerate(target.elements) if isinstance(e, cst.StarredElement)]
            if starred:
                raise self.unsupported(target, "starred assignment", "not modelled")
            for element, item in zip(target.elements, items):
                self.assign(element.value, item, scope, node)
        elif isinstance(target, cst.Attribute):
            obj = self.eval(target.value, scope)
            self.set_attribute(obj, target.attr.value, value, target)
        elif isinstance(target, cst.Subscript):
            obj = self.eval(target.value, scope)
            self.set_item(obj, target, value, scope)
        else:
            raise self.unsupported(target, None, "assignment target not modelled")

    def unpack(self, value: Any, count: int, node: cst.CSTNode) -> list:
        if isinstance(value, (list, tuple)):
            items = list(value)
        elif isinstance(value, Tensor):
            raise self.unsupported(node, None, "unpacking a tensor is not modelled")
        elif isinstance(value, MaxResult):
            items = [value.values, value]
        else:
            try:
                items = list(value)
            except TypeError:
                raise self.unsupported(node, None, f"cannot unpack {type(value).__name__}") from None
        if len(items) != count:
            raise self.unsupported(node, None, f"unpacks {len(items)} values into {count} names")
        return items

    def set_attribute(self, obj: Any, name: str, value: Any, node: cst.CSTNode) -> None:
        if isinstance(obj, ModuleObj):
            if isinstance(value, ModuleObj) and value.kind != "object" and value.fqn.startswith("#"):
                self.adopt(obj, name, value)
            if isinstance(value, ModuleObj) and name not in obj.children_order:
                obj.children_order.append(name)
            if isinstance(value, list) and any(isinstance(v, ModuleObj) for v in value):
                for i, element in enumerate(value):
                    if isinstance(element, ModuleObj) and element.fqn.startswith("#"):
                        self.adopt(obj, f"{name}.{i}", element)
            obj.attrs[name] = value
            from .nn_modules import adopt_parameter
            adopt_parameter(self, obj, name, value)
        elif isinstance(obj, AutogradCtx):
            obj.attrs[name] = value
        elif isinstance(obj, Tensor):
            obj.__dict__.setdefault("meta", {})[name] = value  # markers such as p.sequence_parallel = True
        elif isinstance(obj, ConfigObj):
            obj.fields[name] = value
        else:
            raise self.unsupported(node, None, f"setting an attribute of {type(obj).__name__} is not modelled")

    def adopt(self, parent: ModuleObj, name: str, child: ModuleObj) -> None:
        """Give ``child`` (and its subtree) its fully qualified name under ``parent``."""
        prefix = f"{parent.fqn}." if parent.fqn and not parent.fqn.startswith("#") else ""
        child.fqn = prefix + name
        for key, grandchild in child.children():
            if isinstance(grandchild, ModuleObj):
                self.adopt(child, key, grandchild)
        for key, item in list(child.attrs.items()):
            if isinstance(item, list):
                for i, element in enumerate(item):
                    if isinstance(element, ModuleObj):
                        self.adopt(child, f"{key}.{i}", element)

    def set_item(self, obj: Any, target: cst.Subscript, value: Any, scope: Scope) -> None:
        line = self.line(target)
        if isinstance(obj, Tensor):
            from .torch_ops import tensor_setitem
            index = self.eval_index(target, scope)
            tensor_setitem(Call(self, line, target), obj, index, value)
        elif isinstance(obj, dict):
            key = self.eval(target.slice[0].slice.value, scope)
            obj[_key(key)] = value
        elif isinstance(obj, list):
            key = self.eval(target.slice[0].slice.value, scope)
            if isinstance(key, sp.Basic) and self.dims.depends_on_rank(key):
                raise self.unsupported(target, None, "a list element chosen by the rank: the program's structure "
                                                     "differs between ranks and world sizes, which the IR cannot "
                                                     "express")
            obj[self.as_int(key, line, "list index")] = value
        elif isinstance(obj, BufferList):
            raise self.unsupported(target, None, "a list with one tensor per rank written element by element (e.g. "
                                                 "a ring all-gather over send/recv): its length and the loop over it "
                                                 "depend on the world size, and the IR states one program for every "
                                                 "mesh size (its reference is the mesh of size 1)")
        else:
            raise self.unsupported(target, None, f"item assignment on {type(obj).__name__} is not modelled")

    def exec_augassign(self, node: cst.AugAssign, scope: Scope) -> None:
        operator = type(node.operator).__name__.replace("Assign", "")
        current = self.eval(node.target, scope)
        value = self.eval(node.value, scope)
        line = self.line(node)
        result = self.binary_operator(operator, current, value, node)
        if isinstance(current, Tensor) and isinstance(result, Tensor):
            self.mutate(current, result, line, f"`{self.source.code(node).strip()}`")
            return
        self.assign(node.target, result, scope, node)

    def exec_if(self, node: cst.If, scope: Scope) -> None:
        condition = self.truth(self.eval(node.test, scope), node.test)
        orelse = node.orelse
        if isinstance(condition, bool):
            if condition:
                self.exec_block(node.body, scope)
            elif isinstance(orelse, cst.If):
                self.exec_if(orelse, scope)
            elif isinstance(orelse, cst.Else):
                self.exec_block(orelse.body, scope)
            return
        self.exec_rank_if(condition.expr, node, scope)

    def exec_rank_if(self, expr: Any, node: cst.If, scope: Scope) -> None:
        """Both branches, each under its ``when`` condition; names rebound in them are merged."""
        before = dict(scope.vars)
        start = len(self.builder.ops)
        both_return = _ends_in_return(node.body) and isinstance(node.orelse, cst.Else) and \
            _ends_in_return(node.orelse.body)
        returned: list = []
        self.builder.when.append(self.dims.mesh_expr(expr))
        self.rank_facts.append(expr)
        self.returning_branches += both_return
        try:
            self.exec_block(node.body, scope)
        except _Return as result:
            if not both_return:
                raise
            returned.append(result.value)
        finally:
            self.builder.when.pop()
            self.rank_facts.pop()
            self.returning_branches -= both_return
        after_then = dict(scope.vars)
        scope.vars.clear()
        scope.vars.update(before)
        negated = sp.Not(expr)
        self.builder.when.append(self.dims.mesh_expr(negated))
        self.rank_facts.append(negated)
        self.returning_branches += both_return
        middle = len(self.builder.ops)
        try:
            if isinstance(node.orelse, cst.If):
                self.exec_if(node.orelse, scope)
            elif isinstance(node.orelse, cst.Else):
                self.exec_block(node.orelse.body, scope)
        except _Return as result:
            if not both_return:
                raise
            returned.append(result.value)
        finally:
            self.builder.when.pop()
            self.rank_facts.pop()
            self.returning_branches -= both_return
        if both_return:
            scope.vars.clear()
            scope.vars.update(before)
            if len(returned) != 2:
                raise self.unsupported(node, "return", "only one branch on the rank returns")
            raise _Return(self._merge_returns(expr, returned[0], returned[1], start, middle, node))
        after_else = dict(scope.vars)
        scope.vars.clear()
        scope.vars.update(before)
        for name in set(after_then) | set(after_else):
            a, b = after_then.get(name, MISSING), after_else.get(name, MISSING)
            if a is b:
                scope.vars[name] = a
                continue
            if a is MISSING or b is MISSING:
                if name not in before:
                    raise self.unsupported(node, "if", f"`{name}` is assigned on some ranks only")
            if isinstance(a, Tensor) and isinstance(b, Tensor):
                scope.vars[name] = self.merge(expr, a, b, start, middle, node)
            elif _same_python(a, b):
                scope.vars[name] = a
            else:
                raise self.unsupported(node, "if", f"`{name}` gets a different non-tensor value depending on the rank")

    def _merge_returns(self, expr: Any, a: Any, b: Any, start: int, middle: int, node: cst.If) -> Any:
        """The value returned by ``if <rank condition>: return a`` / ``return b``, rank by rank."""
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            return self.merge(expr, a, b, start, middle, node)
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
            return tuple(self._merge_returns(expr, x, y, start, middle, node) for x, y in zip(a, b))
        if _same_python(a, b):
            return a
        raise self.unsupported(node, "return", "the branches on the rank return different kinds of values")

    def merge(self, expr: Any, a: Tensor, b: Tensor, start: int, middle: int, node: cst.If) -> Tensor:
        """The value of a name after a branch on the rank: ``a`` where ``expr`` holds, else ``b``."""
        line = self.line(node)
        # An op under `when` yields its first argument on the other ranks: if b's ops start from a, b is the merge.
        if self._chains_to(b, a.name, middle):
            return b
        if self._chains_to(a, b.name, start) and b.name is not None and not any(
                b.name in r.results for r in self.builder.ops[middle:]):
            return a
        mask = self.condition_tensor(expr, line)
        return self.where(mask, a, b, line)

    def _chains_to(self, value: Tensor, origin: str | None, since: int) -> bool:
        name = value.name
        producers = {r: rec for rec in self.builder.ops[since:] for r in rec.results}
        while name != origin:
            record = producers.get(name)
            if record is None or not record.args or "when" not in record.attrs:
                return False
            name = record.args[0]
        return True

    def condition_tensor(self, expr: Any, line: int | None) -> Tensor:
        """A 0-d bool tensor for a condition on the rank."""
        if isinstance(expr, sp.Not):
            return self.op("logical_not", [self.condition_tensor(expr.args[0], line)], {}, (), "bool", line,
                           unconditional=True)
        if isinstance(expr, (sp.And, sp.Or)):
            kind = "logical_and" if isinstance(expr, sp.And) else "logical_or"
            acc = self.condition_tensor(expr.args[0], line)
            for arg in expr.args[1:]:
                acc = self.op(kind, [acc, self.condition_tensor(arg, line)], {}, (), "bool", line, unconditional=True)
            return acc
        kinds = {sp.Eq: "eq", sp.Ne: "ne", sp.StrictLessThan: "lt", sp.LessThan: "le", sp.StrictGreaterThan: "gt",
                 sp.GreaterThan: "ge"}
        for cls, kind in kinds.items():
            if isinstance(expr, cls):
                left = self.scalar_tensor(expr.lhs, line)
                right = expr.rhs
                if self.dims.depends_on_mesh(right):
                    return self.op(kind, [left, self.scalar_tensor(right, line)], {}, (), "bool", line,
                                   unconditional=True)
                return self.op(kind, [left], {"scalar": self.scalar_attr(right, line)}, (), "bool", line,
                               unconditional=True)
        raise UnsupportedError(line, "if", f"condition {expr} is not modelled")

    def exec_for(self, node: cst.For, scope: Scope) -> None:
        iterable = self.eval(node.iter, scope)
        items = self.iterate(iterable, node.iter)
        if node.orelse is not None:
            raise self.unsupported(node, "for/else", "not modelled")
        for item in items:
            self.assign(node.target, item, scope, node)
            self.exec_block(node.body, scope)

    def iterate(self, value: Any, node: cst.CSTNode) -> list:
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(value, dict):
            return list(value.keys())
        if isinstance(value, RangeObj):
            return value.items(self, node)
        if isinstance(value, ModuleObj) and value.kind in ("ModuleList", "Sequential"):
            return [child for _, child in value.children()]
        if isinstance(value, ModuleObj) and value.kind == "ModuleDict":
            return [key for key, _ in value.children()]
        if isinstance(value, HandleList):
            return list(value.handles)
        if isinstance(value, WorldPieces):
            raise self.unsupported(node, None, "iterating over the world's pieces: the loop length depends on the "
                                               "world size")
        raise self.unsupported(node, None, f"iteration over {type(value).__name__} is not modelled")

    def exec_with(self, node: cst.With, scope: Scope) -> None:
        from .values import LossParallel, NoOpContext
        saved = self.loss_parallel
        for item in node.items:
            manager = self.eval(item.item, scope)
            if isinstance(manager, LossParallel):
                self.loss_parallel = True
            elif isinstance(manager, NoOpContext):
                pass
            else:
                raise self.unsupported(item.item, None, "context manager not modelled")
            if item.asname is not None:
                self.assign(item.asname.name, None, scope, node)
        try:
            self.exec_block(node.body, scope)
        finally:
            self.loss_parallel = saved

    # -- conditions ---------------------------------------------------------------------
    def truth(self, value: Any, node: cst.CSTNode) -> bool | RankCondition:
        if isinstance(value, RankCondition):
            return value
        if isinstance(value, Tensor):
            raise self.unsupported(node, None, "control flow on tensor values is not modelled")
        if isinstance(value, sp.Basic):
            if self.dims.depends_on_rank(value):
                if _is_condition(value):
                    return RankCondition(value)
                return RankCondition(sp.Ne(value, 0))
            if self.dims.depends_on_size(value):
                self.note(f"line {self.line(node)}: a condition on the world size is decided for the mesh "
                          f"{self.dims.mesh}")
            try:
                result = self.dims.concrete(value)
            except (ValueError, TypeError):
                raise self.unsupported(node, None, "condition not modelled") from None
            self._check_world_one(value, bool(result), node)
            for symbol in value.free_symbols & set(self.dims.values):
                self.dims.pin(symbol)
            return bool(result)
        if value is None or isinstance(value, (bool, int, float, str, list, tuple, dict)):
            return bool(value)
        return True

    def _check_world_one(self, condition: Any, on_mesh: bool, node: cst.CSTNode) -> None:
        """Record a world-size condition that the code at world size 1 decides the other way."""
        at_one = to_sym(condition).subs(self.dims.values).subs({size: 1 for size in self.dims.size.values()})
        if at_one in (sp.true, sp.false) and bool(at_one) != on_mesh:
            line = self.line(node)
            self.reference_caveats.append((line, f"line {line}: a condition on the world size is {on_mesh} on mesh "
                                                 f"{self.dims.mesh} but {bool(at_one)} at world size 1; the static "
                                                 f"reader follows one branch, so the single-device reference is not "
                                                 f"what this file runs on one rank"))

    def decide(self, relation: Any) -> bool:
        """A comparison of sizes, decided with the file's values; the outcome becomes a requirement on
        the dim symbols (so reduced shapes take the same branch), or pins them when it cannot be written."""
        outcome = bool(self.dims.concrete(relation))
        held = self.dims.at_mesh(relation if outcome else sp.Not(relation))
        if held is sp.true or not (held.free_symbols & set(self.dims.values)):
            return outcome
        try:
            text = self.dims.format(held)
        except ValueError:
            text = None
        # the .vir text form writes requirements with `==` only
        if text is None or not isinstance(held, sp.Eq) or " and " in text or " or " in text:
            for symbol in relation.free_symbols & set(self.dims.values):
                self.dims.pin(symbol)
        else:
            self.dims.require(text)
        return outcome

    # -- expressions --------------------------------------------------------------------
    def eval(self, node: cst.BaseExpression, scope: Scope) -> Any:
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node, None, f"{type(node).__name__} expressions are not modelled")
        return method(node, scope)

    def eval_Name(self, node: cst.Name, scope: Scope) -> Any:
        if node.value == "True":
            return True
        if node.value == "False":
            return False
        if node.value == "None":
            return None
        try:
            value = scope.lookup(node.value)
        except KeyError:
            raise self.unsupported(node, node.value, "unknown name") from None
        if isinstance(value, RankOnly) and any(fact == value.condition for fact in self.rank_facts):
            return value.value  # read where it exists: `cat(parts) if rank == 0 else ...`
        return value

    def eval_Integer(self, node: cst.Integer, scope: Scope) -> Any:
        return sp.Integer(int(node.evaluated_value))

    def eval_Float(self, node: cst.Float, scope: Scope) -> Any:
        return float(node.evaluated_value)

    def eval_SimpleString(self, node: cst.SimpleString, scope: Scope) -> Any:
        return node.evaluated_value

    def eval_ConcatenatedString(self, node: cst.ConcatenatedString, scope: Scope) -> Any:
        return node.evaluated_value

    def eval_FormattedString(self, node: cst.FormattedString, scope: Scope) -> Any:
        return self.source.code(node)

    def eval_Ellipsis(self, node: cst.Ellipsis, scope: Scope) -> Any:
        return Ellipsis

    def eval_Tuple(self, node: cst.Tuple, scope: Scope) -> Any:
        return tuple(self.eval_elements(node.elements, scope))

    def eval_List(self, node: cst.List, scope: Scope) -> Any:
        return self.eval_elements(node.elements, scope)

    def eval_Set(self, node: cst.Set, scope: Scope) -> Any:
        return self.eval_elements(node.elements, scope)

    def eval_elements(self, elements, scope: Scope) -> list:
        out = []
        for element in elements:
            if isinstance(element, cst.StarredElement):
                out.extend(self.iterate(self.eval(element.value, scope), element))
            else:
                out.append(self.eval(element.value, scope))
        return out

    def eval_Dict(self, node: cst.Dict, scope: Scope) -> Any:
        out = {}
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                out.update(self.eval(element.value, scope))
            else:
                out[_key(self.eval(element.key, scope))] = self.eval(element.value, scope)
        return out

    def eval_Attribute(self, node: cst.Attribute, scope: Scope) -> Any:
        obj = self.eval(node.value, scope)
        return self.get_attribute(obj, node.attr.value, node)

    def get_attribute(self, obj: Any, name: str, node: cst.CSTNode) -> Any:
        from .torch_ops import tensor_attribute
        line = self.line(node)
        if isinstance(obj, QualName):
            child = obj.child(name)
            constant = CONSTANTS.get(canonical(child.name))
            return constant if constant is not None else child
        if isinstance(obj, Tensor):
            return tensor_attribute(Call(self, line, node), obj, name)
        if isinstance(obj, ModuleObj):
            return self.module_attribute(obj, name, node)
        if isinstance(obj, ClassObj):
            found = self.class_lookup(obj, name)
            if found is not MISSING:
                return found
            if name == "apply" and self.is_autograd(obj):
                return BoundMethod(obj, "apply")
            raise self.unsupported(node, None, f"class {obj.name} has no attribute {name}")
        if isinstance(obj, SuperObj):
            return BoundMethod(obj, name)
        if isinstance(obj, ConfigObj):
            from .megatron import config_field
            return config_field(obj, name)
        if isinstance(obj, AutogradCtx):
            if name in obj.attrs:
                return obj.attrs[name]
            return BoundMethod(obj, name)
        if isinstance(obj, MaxResult):
            if name == "values":
                return obj.values
            raise self.unsupported(node, None, "argmax indices are not modelled")
        if (type(obj), name) in OBJECT_METHODS or isinstance(obj, (MeshObj, Handle, HandleList, list, dict)):
            return BoundMethod(obj, name)
        if isinstance(obj, sp.Basic) and name in ("item",):
            return BoundMethod(obj, name)
        raise self.unsupported(node, None, f"attribute {name} of {type(obj).__name__} is not modelled")

    def module_attribute(self, module: ModuleObj, name: str, node: cst.CSTNode) -> Any:
        if name in module.attrs:
            return module.attrs[name]
        if module.cls is not None:
            found = self.class_lookup(module.cls, name)
            if found is not MISSING:
                if isinstance(found, FunctionObj):
                    decorators = {self.source.code(d.decorator).strip() for d in found.node.decorators}
                    if "staticmethod" in decorators:
                        return found
                    if "property" in decorators:
                        return self.call_function(found, [module], {}, node)
                    return FunctionObj(found.node, found.scope, found.owner, module)
                return found
        if name in ("forward", "__call__"):
            return BoundMethod(module, "__call__")
        if name in ("to", "cuda", "cpu", "float", "eval", "train", "requires_grad_", "half", "bfloat16",
                    "register_buffer", "register_parameter", "parameters", "named_parameters", "children",
                    "named_children", "modules"):
            return BoundMethod(module, name)
        if name == "training":
            return False
        raise self.unsupported(node, None, f"module attribute {name} is not modelled")

    def class_lookup(self, cls: ClassObj, name: str) -> Any:
        for statement in cls.node.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                return FunctionObj(statement, cls.scope, cls)
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign):
                        for target in small.targets:
                            if isinstance(target.target, cst.Name) and target.target.value == name:
                                return self.eval(small.value, cls.scope)
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                            and small.target.value == name and small.value is not None:
                        return self.eval(small.value, cls.scope)
        for base in cls.bases:
            if isinstance(base, ClassObj):
                found = self.class_lookup(base, name)
                if found is not MISSING:
                    return found
        return MISSING

    def is_autograd(self, cls: ClassObj) -> bool:
        for base in cls.bases:
            if isinstance(base, QualName) and canonical(base.name) in ("torch.autograd.Function",
                                                                        "torch.autograd.function.Function"):
                return True
            if isinstance(base, ClassObj) and self.is_autograd(base):
                return True
        return False

    def is_module_class(self, cls: ClassObj) -> bool:
        for base in cls.bases:
            if isinstance(base, QualName) and canonical(base.name) in ("nn.Module",):
                return True
            if isinstance(base, ClassObj) and self.is_module_class(base):
                return True
        return False

    def eval_Subscript(self, node: cst.Subscript, scope: Scope) -> Any:
        obj = self.eval(node.value, scope)
        line = self.line(node)
        if isinstance(obj, Tensor):
            from .torch_ops import tensor_getitem
            return tensor_getitem(Call(self, line, node), obj, self.eval_index(node, scope))
        if isinstance(obj, QualName):
            return obj  # typing generics such as list[int]
        if len(node.slice) != 1:
            raise self.unsupported(node, None, "multi-dimensional indexing of a non-tensor")
        element = node.slice[0].slice
        if isinstance(element, cst.Slice):
            if not isinstance(obj, (list, tuple)):
                raise self.unsupported(node, None, f"slicing {type(obj).__name__} is not modelled")
            bounds = [None if part is None else self.as_int(self.eval(part, scope), line, "slice")
                      for part in (element.lower, element.upper, element.step)]
            return obj[slice(*bounds)]
        key = self.eval(element.value, scope)
        return self.index_value(obj, key, node)

    def index_value(self, obj: Any, key: Any, node: cst.CSTNode) -> Any:
        line = self.line(node)
        if isinstance(obj, WorldPieces):
            from .explicit import pick_piece
            return pick_piece(Call(self, line, node), obj, key)
        if isinstance(obj, (list, tuple)):
            if isinstance(key, sp.Basic) and self.dims.depends_on_mesh(key):
                raise self.unsupported(node, None, "a list element chosen by the rank or world size: the program's "
                                                   "structure differs between ranks, which the IR cannot express")
            index = self.as_int(key, line, "index")
            try:
                return obj[index]
            except IndexError:
                raise self.unsupported(node, None, "index out of range") from None
        if isinstance(obj, dict):
            try:
                return obj[_key(key)]
            except KeyError:
                raise self.unsupported(node, None, f"key {key!r} not found") from None
        if isinstance(obj, MaxResult):
            if self.as_int(key, line, "index") == 0:
                return obj.values
            raise self.unsupported(node, None, "argmax indices are not modelled")
        if isinstance(obj, ModuleObj) and obj.kind in ("ModuleList", "Sequential"):
            children = [child for _, child in obj.children()]
            return children[self.as_int(key, line, "index")]
        if isinstance(obj, ModuleObj) and obj.kind == "ModuleDict":
            return obj.attrs[_key(key)]
        if isinstance(obj, MeshObj):
            from .dtensor import submesh
            return submesh(Call(self, line, node), obj, key)
        if isinstance(obj, HandleList):
            return obj.handles[self.as_int(key, line, "index")]
        raise self.unsupported(node, None, f"indexing {type(obj).__name__} is not modelled")

    def eval_index(self, node: cst.Subscript, scope: Scope) -> list:
        """Tensor indexing elements: ints/sympy, slices (as python slices), None, Ellipsis, tensors."""
        out = []
        for element in node.slice:
            item = element.slice
            if isinstance(item, cst.Slice):
                parts = [None if p is None else self.eval(p, scope) for p in (item.lower, item.upper, item.step)]
                out.append(slice(*parts))
            else:
                value = self.eval(item.value, scope)
                if isinstance(value, tuple):
                    out.extend(value)
                else:
                    out.append(value)
        return out

    def eval_BinaryOperation(self, node: cst.BinaryOperation, scope: Scope) -> Any:
        left = self.eval(node.left, scope)
        right = self.eval(node.right, scope)
        return self.binary_operator(type(node.operator).__name__, left, right, node)

    def binary_operator(self, operator: str, left: Any, right: Any, node: cst.CSTNode) -> Any:
        line = self.line(node)
        if isinstance(left, Tensor) or isinstance(right, Tensor):
            from .torch_ops import tensor_binary
            return tensor_binary(Call(self, line, node), operator, left, right)
        if isinstance(left, (list, tuple)) and operator == "Add":
            return type(left)(list(left) + list(right))
        if isinstance(left, (list, tuple)) and operator == "Multiply":
            return type(left)(list(left) * self.as_int(right, line, "list repetition"))
        if isinstance(left, str) or isinstance(right, str):
            if operator == "Add":
                return f"{left}{right}"
            if operator == "Modulo":
                return str(left)
        if _is_number(left) and _is_number(right):
            return self.number_operator(operator, left, right, node)
        raise self.unsupported(node, None, f"operator {operator} on {type(left).__name__} and "
                                           f"{type(right).__name__} is not modelled")

    def number_operator(self, operator: str, left: Any, right: Any, node: cst.CSTNode) -> Any:
        a, b = _sym(left), _sym(right)
        if operator == "Add":
            return a + b
        if operator == "Subtract":
            return a - b
        if operator == "Multiply":
            return a * b
        if operator == "Divide":
            if b == 0:
                raise self.unsupported(node, None, "division by zero")
            return a / b if not (a.is_Float or b.is_Float) else sp.Float(a / b) if (a / b).is_number else a / b
        if operator == "FloorDivide":
            return self.dims.floordiv(a, b)
        if operator == "Modulo":
            if a.is_number and b.is_number:
                return a % b
            return sp.Mod(a, b)
        if operator == "Power":
            return a ** b
        if operator in ("BitAnd", "BitOr", "BitXor", "LeftShift", "RightShift"):
            if a.is_Integer and b.is_Integer:
                x, y = int(a), int(b)
                return sp.Integer({"BitAnd": x & y, "BitOr": x | y, "BitXor": x ^ y, "LeftShift": x << y,
                                   "RightShift": x >> y}[operator])
        raise self.unsupported(node, None, f"operator {operator} on numbers is not modelled")

    def eval_UnaryOperation(self, node: cst.UnaryOperation, scope: Scope) -> Any:
        value = self.eval(node.expression, scope)
        operator = type(node.operator).__name__
        line = self.line(node)
        if isinstance(value, Tensor):
            if operator == "Minus":
                return self.unary("neg", value, line)
            if operator == "Plus":
                return value
            if operator == "BitInvert":
                if value.dtype != "bool":
                    raise self.unsupported(node, None, "~ on a non-bool tensor (bitwise not) is not modelled")
                return self.unary("logical_not", value, line)
            raise self.unsupported(node, None, "`not` on a tensor is not modelled")
        if operator == "Not":
            truth = self.truth(value, node)
            return RankCondition(sp.Not(truth.expr)) if isinstance(truth, RankCondition) else not truth
        if _is_number(value):
            if operator == "Minus":
                return -_sym(value)
            if operator == "Plus":
                return value
        if isinstance(value, RankCondition) and operator == "Not":
            return RankCondition(sp.Not(value.expr))
        raise self.unsupported(node, None, f"unary {operator} not modelled")

    def eval_BooleanOperation(self, node: cst.BooleanOperation, scope: Scope) -> Any:
        left = self.eval(node.left, scope)
        is_and = isinstance(node.operator, cst.And)
        truth = self.truth(left, node.left)
        if isinstance(truth, bool):
            if is_and and not truth:
                return left
            if not is_and and truth:
                return left
            return self.eval(node.right, scope)
        right = self.truth(self.eval(node.right, scope), node.right)
        if isinstance(right, bool):
            if is_and:
                return truth if right else False
            return True if right else truth
        return RankCondition(sp.And(truth.expr, right.expr) if is_and else sp.Or(truth.expr, right.expr))

    def eval_Comparison(self, node: cst.Comparison, scope: Scope) -> Any:
        left = self.eval(node.left, scope)
        result: Any = True
        for target in node.comparisons:
            right = self.eval(target.comparator, scope)
            value = self.compare(type(target.operator).__name__, left, right, node)
            if isinstance(value, Tensor):
                if len(node.comparisons) > 1:
                    raise self.unsupported(node, None, "chained tensor comparisons are not modelled")
                return value
            result = value if result is True else self.combine_and(result, value)
            left = right
        return result

    def combine_and(self, a: Any, b: Any) -> Any:
        if isinstance(a, RankCondition) or isinstance(b, RankCondition):
            ea = a.expr if isinstance(a, RankCondition) else sp.true if a else sp.false
            eb = b.expr if isinstance(b, RankCondition) else sp.true if b else sp.false
            return RankCondition(sp.And(ea, eb))
        return bool(a) and bool(b)

    def compare(self, operator: str, left: Any, right: Any, node: cst.CSTNode) -> Any:
        line = self.line(node)
        if operator in ("Is", "IsNot"):
            same = left is right or (left is None and right is None)
            return same if operator == "Is" else not same
        if operator in ("In", "NotIn"):
            container = right.keys() if isinstance(right, dict) else right
            found = any(_same_python(left, item) for item in container)
            return found if operator == "In" else not found
        kinds = {"LessThan": "lt", "LessThanEqual": "le", "GreaterThan": "gt", "GreaterThanEqual": "ge",
                 "Equal": "eq", "NotEqual": "ne"}
        kind = kinds.get(operator)
        if kind is None:
            raise self.unsupported(node, None, f"comparison {operator} not modelled")
        if isinstance(left, Tensor) or isinstance(right, Tensor):
            return self.binary(kind, left, right, line)
        if _is_number(left) and _is_number(right):
            a, b = _sym(left), _sym(right)
            relation = {"lt": sp.Lt, "le": sp.Le, "gt": sp.Gt, "ge": sp.Ge, "eq": sp.Eq, "ne": sp.Ne}[kind](a, b)
            if self.dims.depends_on_rank(a) or self.dims.depends_on_rank(b):
                return RankCondition(relation)
            if a.free_symbols or b.free_symbols:
                if self.dims.depends_on_size(a) or self.dims.depends_on_size(b):
                    self.note(f"line {line}: a comparison with the world size is decided for the mesh "
                              f"{self.dims.mesh}")
                    outcome = self.decide(relation)
                    self._check_world_one(relation, outcome, node)
                    return outcome
                return self.decide(relation)
            return bool(relation)
        if kind in ("eq", "ne"):
            same = _same_python(left, right)
            return same if kind == "eq" else not same
        raise self.unsupported(node, None, f"comparison of {type(left).__name__} and {type(right).__name__}")

    def _under(self, fact: Any, read: Callable[[], Any]) -> Any:
        self.rank_facts.append(fact)
        try:
            return read()
        finally:
            self.rank_facts.pop()

    def eval_IfExp(self, node: cst.IfExp, scope: Scope) -> Any:
        condition = self.truth(self.eval(node.test, scope), node.test)
        if isinstance(condition, bool):
            return self.eval(node.body if condition else node.orelse, scope)
        a = self._under(condition.expr, lambda: self.eval(node.body, scope))
        b = self._under(sp.Not(condition.expr), lambda: self.eval(node.orelse, scope))
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            return self.where(self.condition_tensor(condition.expr, self.line(node)), a, b, self.line(node))
        if a is None and b is None:
            return None
        if a is None or b is None:
            return RankOnly(a, condition.expr) if a is not None else RankOnly(b, sp.Not(condition.expr))
        if _is_number(a) and _is_number(b):
            return sp.Piecewise((_sym(a), condition.expr), (_sym(b), True))
        raise self.unsupported(node, None, "a value chosen by the rank is not modelled")

    def eval_ListComp(self, node: cst.ListComp, scope: Scope) -> Any:
        return self.comprehension(node, scope)

    def eval_GeneratorExp(self, node: cst.GeneratorExp, scope: Scope) -> Any:
        return self.comprehension(node, scope)

    def comprehension(self, node, scope: Scope) -> list:
        loop = node.for_in
        iterable = self.eval(loop.iter, scope)
        if isinstance(iterable, RangeObj) and iterable.world_dims is not None and loop.inner_for_in is None:
            from .explicit import buffer_list
            return buffer_list(Call(self, self.line(node), node), node, iterable, scope)
        items = self.iterate(iterable, loop.iter)
        out = []
        for item in items:
            inner = Scope(scope, scope.module)
            self.assign(loop.target, item, inner, node)
            if all(self.truth(self.eval(cond.test, inner), cond) is True for cond in loop.ifs):
                if loop.inner_for_in is not None:
                    raise self.unsupported(node, None, "nested comprehensions are not modelled")
                out.append(self.eval(node.elt, inner))
        return out

    def eval_Lambda(self, node: cst.Lambda, scope: Scope) -> Any:
        return LambdaObj(node, scope)

    def eval_Call(self, node: cst.Call, scope: Scope) -> Any:
        callee = self.eval(node.func, scope)
        if isinstance(callee, Builtin) and callee.name == "super":
            if node.args:
                return SuperObj(self.eval(node.args[0].value, scope), self.eval(node.args[1].value, scope))
            try:
                return SuperObj(scope.lookup("__class__"), scope.lookup("__self__"))
            except KeyError:
                raise self.unsupported(node, "super()", "outside a method") from None
        args, kwargs = [], {}
        for arg in node.args:
            value = self.eval(arg.value, scope)
            if arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            elif arg.star == "*":
                args.extend(self.iterate(value, arg.value))
            elif arg.star == "**":
                if not isinstance(value, dict):
                    raise self.unsupported(arg, None, "** of a non-dict")
                kwargs.update(value)
            else:
                args.append(value)
        return self.call(callee, args, kwargs, node)

    def call(self, callee: Any, args: list, kwargs: dict, node: cst.CSTNode) -> Any:
        line = self.line(node)
        cx = Call(self, line, node, self.hint)
        if isinstance(callee, QualName):
            self.executed_lines.add(line)
            name = canonical(callee.name)
            if self.input_mode and name in _INPUT_CREATORS:
                from .entry import input_spec
                return input_spec(cx, name.split(".")[-1], tuple(args), kwargs)
            handler = FUNCTIONS.get(name)
            if handler is None:
                raise self.unsupported(node, callee.name, "library function not modelled")
            cx.name = name
            return self.invoke(handler, cx, args, kwargs, callee.name)
        if isinstance(callee, BoundMethod):
            return self.call_method(callee, args, kwargs, node, cx)
        if isinstance(callee, FunctionObj):
            return self.call_function(callee, args, kwargs, node)
        if isinstance(callee, ClassObj):
            return self.instantiate(callee, args, kwargs, node)
        if isinstance(callee, ModuleObj):
            return self.call_module(callee, args, kwargs, node)
        if isinstance(callee, Builtin):
            from .builtins import call_builtin
            return call_builtin(cx, callee.name, args, kwargs)
        if isinstance(callee, LambdaObj):
            inner = Scope(callee.scope, callee.scope.module)
            params = [p.name.value for p in callee.node.params.params]
            for name, value in zip(params, args):
                inner.vars[name] = value
            return self.eval(callee.node.body, inner)
        raise self.unsupported(node, None, f"calling {type(callee).__name__} is not modelled")

    def invoke(self, handler, cx: Call, args: list, kwargs: dict, what: str, *prefix: Any) -> Any:
        try:
            return handler(cx, *prefix, *args, **kwargs)
        except TypeError as error:
            if "argument" in str(error) and ("positional" in str(error) or "keyword" in str(error)):
                raise UnsupportedError(cx.line, what, f"arguments not modelled ({_strip(str(error))})") from None
            raise

    def call_method(self, bound: BoundMethod, args: list, kwargs: dict, node: cst.CSTNode, cx: Call) -> Any:
        obj, name = bound.obj, bound.name
        cx.name = name
        if isinstance(obj, Tensor):
            handler = METHODS.get(name)
            if handler is None:
                raise self.unsupported(node, f".{name}()", "tensor method not modelled")
            return self.invoke(handler, cx, args, kwargs, f".{name}()", obj)
        if isinstance(obj, ModuleObj):
            if name == "__call__":
                return self.call_module(obj, args, kwargs, node)
            if name in ("parameters", "named_parameters"):
                found = _parameters(obj, "")
                return [t for _, t in found] if name == "parameters" else found
            if name in ("children", "named_children"):
                return [c for _, c in obj.children()] if name == "children" else list(obj.children())
            if name == "modules":
                return _modules(obj)
            if name in ("register_buffer", "register_parameter"):
                from .nn_modules import register_on_module
                register_on_module(cx, obj, args[0], args[1] if len(args) > 1 else kwargs.get("tensor",
                                                                                               kwargs.get("param")))
                return None
            if name in ("float", "half", "bfloat16") or (name == "to" and any(
                    not isinstance(a, str) for a in list(args) + list(kwargs.values()))):
                raise self.unsupported(node, f".{name}()", "changing a module's dtype is not modelled")
            return obj  # .to(device), .cuda(), .eval(): the same module
        if isinstance(obj, ClassObj) and name == "apply":
            from .explicit import autograd_apply
            return autograd_apply(cx, obj, args, kwargs)
        if isinstance(obj, SuperObj):
            return self.call_super(obj, name, args, kwargs, node)
        if isinstance(obj, AutogradCtx):
            if name in ("save_for_backward", "mark_dirty", "mark_non_differentiable", "set_materialize_grads"):
                obj.attrs.setdefault("saved_tensors", tuple(args))
                return None
            raise self.unsupported(node, f"ctx.{name}", "not modelled")
        handler = OBJECT_METHODS.get((type(obj), name))
        if handler is None and isinstance(obj, list) and name in ("append", "extend", "insert", "pop"):
            return _list_method(obj, name, args)
        if handler is None and isinstance(obj, dict) and name in ("items", "keys", "values", "get"):
            return _dict_method(obj, name, args)
        if handler is None and isinstance(obj, sp.Basic) and name == "item":
            return obj
        if handler is None:
            raise self.unsupported(node, f".{name}()", f"method of {type(obj).__name__} not modelled")
        return self.invoke(handler, cx, args, kwargs, f".{name}()", obj)

    def call_super(self, sup: SuperObj, name: str, args: list, kwargs: dict, node: cst.CSTNode) -> Any:
        for base in sup.cls.bases:
            if isinstance(base, ClassObj):
                found = self.class_lookup(base, name)
                if isinstance(found, FunctionObj):
                    return self.call_function(found, [sup.instance, *args], kwargs, node)
        if name == "__init__":
            return None  # nn.Module / object / autograd.Function constructors hold nothing we model
        if name == "forward" and isinstance(sup.instance, ModuleObj):
            from .nn_modules import library_base_forward
            return library_base_forward(Call(self, self.line(node), node), sup, args, kwargs)
        raise self.unsupported(node, f"super().{name}", "not modelled")

    def call_function(self, function: FunctionObj, args: list, kwargs: dict, node: cst.CSTNode) -> Any:
        if self.depth > MAX_DEPTH:
            raise self.unsupported(node, function.name, "recursion is not modelled")
        if function.bound is not None:
            args = [function.bound, *args]
        scope = Scope(function.scope, function.scope.module)
        self.bind(function, args, kwargs, scope, node)
        scope.vars["__class__"] = function.owner
        if args:
            scope.vars["__self__"] = args[0]
        self.depth += 1
        saved_hint = self.hint
        try:
            self.exec_block(function.node.body, scope)
        except _Return as result:
            return result.value
        finally:
            self.depth -= 1
            self.hint = saved_hint
        return None

    def bind(self, function: FunctionObj, args: list, kwargs: dict, scope: Scope, node: cst.CSTNode) -> None:
        params = function.node.params
        positional = list(params.posonly_params) + list(params.params)
        args = list(args)
        kwargs = dict(kwargs)
        for param in positional:
            name = param.name.value
            if args:
                scope.vars[name] = args.pop(0)
            elif name in kwargs:
                scope.vars[name] = kwargs.pop(name)
            elif param.default is not None:
                scope.vars[name] = self.eval(param.default, function.scope)
            else:
                raise self.unsupported(node, function.name, f"missing argument {name}")
        star = params.star_arg
        if isinstance(star, cst.Param):
            scope.vars[star.name.value] = tuple(args)
            args = []
        for param in params.kwonly_params:
            name = param.name.value
            if name in kwargs:
                scope.vars[name] = kwargs.pop(name)
            elif param.default is not None:
                scope.vars[name] = self.eval(param.default, function.scope)
            else:
                raise self.unsupported(node, function.name, f"missing keyword argument {name}")
        if params.star_kwarg is not None:
            scope.vars[params.star_kwarg.name.value] = kwargs
            kwargs = {}
        if args:
            raise self.unsupported(node, function.name, f"{len(args)} extra positional arguments")
        if kwargs:
            raise self.unsupported(node, function.name, f"unexpected keyword arguments {sorted(kwargs)}")

    def instantiate(self, cls: ClassObj, args: list, kwargs: dict, node: cst.CSTNode) -> Any:
        if self.is_autograd(cls):
            raise self.unsupported(node, cls.name, "autograd.Function subclasses are used through .apply()")
        kind = "user" if self.is_module_class(cls) else "object"
        obj = ModuleObj(kind, cls, line=self.line(node), fqn=f"#{id(cls)}")
        init = self.class_lookup(cls, "__init__")
        if isinstance(init, FunctionObj):
            self.call_function(init, [obj, *args], kwargs, node)
        elif kind == "object":
            self.dataclass_init(cls, obj, args, kwargs, node)
        return obj

    def dataclass_init(self, cls: ClassObj, obj: ModuleObj, args: list, kwargs: dict, node: cst.CSTNode) -> None:
        fields = []
        for statement in cls.node.body.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        fields.append((small.target.value, small.value))
        args = list(args)
        for name, default in fields:
            if args:
                obj.attrs[name] = args.pop(0)
            elif name in kwargs:
                obj.attrs[name] = kwargs.pop(name)
            elif default is not None:
                obj.attrs[name] = self.eval(default, cls.scope)
        if args or kwargs:
            raise self.unsupported(node, cls.name, "constructor arguments not modelled")

    def call_module(self, module: ModuleObj, args: list, kwargs: dict, node: cst.CSTNode) -> Any:
        from .dtensor import call_with_style
        if module.style is not None:
            return call_with_style(Call(self, self.line(node), node, self.hint), module, args, kwargs)
        return self.module_forward(module, args, kwargs, node)

    def module_forward(self, module: ModuleObj, args: list, kwargs: dict, node: cst.CSTNode) -> Any:
        if module.kind == "user":
            forward = self.class_lookup(module.cls, "forward")
            if not isinstance(forward, FunctionObj):
                raise self.unsupported(node, module.cls.name, "module without forward")
            return self.call_function(FunctionObj(forward.node, forward.scope, forward.owner, module), args, kwargs,
                                      node)
        if module.kind == "object":
            call = self.class_lookup(module.cls, "__call__")
            if isinstance(call, FunctionObj):
                return self.call_function(FunctionObj(call.node, call.scope, call.owner, module), args, kwargs, node)
            raise self.unsupported(node, module.cls.name, "object is not callable")
        handler = LAYERS.get(module.kind)
        if handler is None:
            raise self.unsupported(node, module.kind, "layer not modelled")
        return self.invoke(handler, Call(self, self.line(node), node, self.hint), args, kwargs, module.kind, module)


@dataclass
class LambdaObj:
    node: cst.Lambda
    scope: Scope


@dataclass
class RangeObj:
    """``range(...)``: static bounds are unrolled; a bound of world size only feeds buffer lists."""

    start: Any
    stop: Any
    step: Any
    world_dims: tuple[str, ...] | None = None

    def items(self, it: Interpreter, node: cst.CSTNode) -> list:
        if it.dims.depends_on_mesh(self.start) or it.dims.depends_on_mesh(self.stop):
            raise it.unsupported(node, None, "a loop whose length depends on the world size: the program's "
                                             "structure differs between world sizes, which the IR cannot express")
        start = it.as_int(self.start, it.line(node), "range")
        stop = it.as_int(self.stop, it.line(node), "range")
        step = it.as_int(self.step, it.line(node), "range")
        if step == 0:
            raise UserError(it.line(node), "range() arg 3 must not be zero")
        count = len(range(start, stop, step))  # O(1): the loop is measured before it is unrolled
        if count > MAX_UNROLLED_ITERATIONS:
            raise it.unsupported(node, None, f"a loop of {count:,} iterations is more than the "
                                             f"{MAX_UNROLLED_ITERATIONS:,} the static frontend unrolls")
        return [sp.Integer(i) for i in range(start, stop, step)]


def _int_literal(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def _hint(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    return None


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, sp.Expr) and not _is_condition(value))


def _is_condition(value: Any) -> bool:
    return isinstance(value, sp.Basic) and (
        value.is_Relational or isinstance(value, sp.logic.boolalg.BooleanFunction)
        or value in (sp.true, sp.false))


def _sym(value: Any) -> Any:
    if isinstance(value, float):
        return sp.Float(value)
    return to_sym(value)


def _key(value: Any) -> Any:
    if isinstance(value, sp.Integer):
        return int(value)
    return value


def _same_python(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, sp.Basic) and isinstance(b, sp.Basic):
        return sp.simplify(a - b) == 0 if _is_number(a) and _is_number(b) else a == b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - foreign objects compare unequal
        return False


def _list_method(obj: list, name: str, args: list) -> Any:
    if name == "append":
        obj.append(args[0])
    elif name == "extend":
        obj.extend(args[0])
    elif name == "insert":
        obj.insert(int(args[0]), args[1])
    elif name == "pop":
        return obj.pop(*(int(a) for a in args))
    return None


def _dict_method(obj: dict, name: str, args: list) -> Any:
    if name == "items":
        return list(obj.items())
    if name == "keys":
        return list(obj.keys())
    if name == "values":
        return list(obj.values())
    return obj.get(_key(args[0]), args[1] if len(args) > 1 else None)


def _parameters(module: ModuleObj, prefix: str) -> list:
    found = []
    for key, value in module.attrs.items():
        if isinstance(value, Tensor) and value.param is not None:
            found.append((prefix + key, value))
    for key, child in module.children():
        found.extend(_parameters(child, f"{prefix}{key}."))
    return found


def _modules(module: ModuleObj) -> list:
    out = [module]
    for _, child in module.children():
        out.extend(_modules(child))
    return out


def _strip(message: str) -> str:
    return message.split("() ", 1)[-1]


__all__ = ["Interpreter", "Scope", "ModuleScope", "RankCondition", "RankOnly", "RangeObj", "SuperObj", "BUILTINS", "math",
           "UserError"]
