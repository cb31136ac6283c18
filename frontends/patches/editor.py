"""A libcst editing session on one source file: find code by line, change only what must change.

Edits are recorded against the nodes of the parsed tree (replace a node, insert statements
before or after a statement, remove a statement) and applied in one transformer pass, so
every untouched line keeps its exact formatting; ``diff`` gives the unified diff against
the original text.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from ..source import canonical, dotted, read_import


class CannotPatch(Exception):
    """The change has no faithful spelling in this file (the fix is then not offered)."""


def call_name(call: cst.Call) -> str | None:
    """The called name: ``f`` of ``f(...)`` and of ``obj.f(...)``; None for other callees."""
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None


def int_literal(node: cst.BaseExpression) -> int | None:
    """The value of an integer literal (``3``, ``-1``); None for anything else."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and \
            isinstance(node.expression, cst.Integer):
        return -int(node.expression.value)
    return None


def unified_diff(original: str, patched: str, path: str) -> str:
    name = path.lstrip("/")
    return "".join(difflib.unified_diff(original.splitlines(keepends=True), patched.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


class _Parents(cst.CSTVisitor):
    def __init__(self) -> None:
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.parents[node] = self.stack[-1]
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


@dataclass
class SourceEditor:
    source: str
    path: str
    module: cst.Module = field(init=False)
    positions: dict = field(init=False)
    parents: dict = field(init=False)
    imports: dict[str, str] = field(init=False)  # local name -> import path
    replacements: dict = field(default_factory=dict)
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    removed: set = field(default_factory=set)
    new_imports: list[str] = field(default_factory=list)
    taken_names: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)  # what the recipes did, in the file's own terms

    def __post_init__(self) -> None:
        try:
            module = cst.parse_module(self.source)
        except cst.ParserSyntaxError as error:
            raise CannotPatch(f"syntax error: {error.message}") from None
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.module = wrapper.module
        self.positions = wrapper.resolve(PositionProvider)
        visitor = _Parents()
        self.module.visit(visitor)
        self.parents = visitor.parents
        self.imports = {}
        modules: list[str] = []
        for node in m.findall(self.module, m.Import() | m.ImportFrom()):
            read_import(node, self.imports, modules)
        self.taken_names = {n.value for n in m.findall(self.module, m.Name())}

    # -- finding code ---------------------------------------------------------------------
    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        position = self.positions[node]
        return position.start.line, position.end.line

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def statement_at(self, line: int | None) -> cst.SimpleStatementLine:
        """The innermost simple statement whose lines include ``line``."""
        if line is None:
            raise CannotPatch("the change has no source line")
        best = None
        for node in m.findall(self.module, m.SimpleStatementLine()):
            start, end = self.span(node)
            if start <= line <= end and (best is None or self.span(best)[0] <= start):
                best = node
        if best is None:
            raise CannotPatch(f"no simple statement on line {line}")
        return best

    def block_of(self, statement: cst.CSTNode) -> cst.CSTNode:
        parent = self.parents.get(statement)
        if not isinstance(parent, (cst.IndentedBlock, cst.Module)):
            raise CannotPatch("the statement is not in a block (one-line suite)")
        return parent

    def function_of(self, node: cst.CSTNode) -> cst.CSTNode:
        current = node
        while current is not None and not isinstance(current, cst.FunctionDef):
            current = self.parents.get(current)
        return current if current is not None else self.module

    def statements_after(self, statement: cst.SimpleStatementLine) -> list[cst.SimpleStatementLine]:
        """Simple statements of the same function after ``statement``, in source order."""
        scope = self.function_of(statement)
        start = self.span(statement)[1]
        found = [s for s in m.findall(scope, m.SimpleStatementLine()) if self.span(s)[0] > start]
        return sorted(found, key=lambda s: self.span(s)[0])

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """Canonical library name of a dotted expression (``dist.all_reduce`` -> ``dist.all_reduce``)."""
        text = dotted(node)
        if text is None:
            return None
        head, _, rest = text.partition(".")
        path = self.imports.get(head)
        if path is None:
            return None
        return canonical(path + ("." + rest if rest else ""))

    def calls_in(self, node: cst.CSTNode) -> list[cst.Call]:
        return list(m.findall(node, m.Call()))

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    # -- names and imports ------------------------------------------------------------------
    def alias(self, import_path: str) -> str | None:
        """The local name under which ``import_path`` is usable (``torch.distributed`` -> ``dist``)."""
        for local, path in self.imports.items():
            if path == import_path and not local.startswith("*"):
                return local
        parent, _, last = import_path.rpartition(".")
        if parent:
            base = self.alias(parent)
            if base is not None:
                return f"{base}.{last}"
        return None

    def imports_module(self, import_path: str) -> bool:
        """Does the file import ``import_path`` (or something from it) explicitly?"""
        return any(path == import_path or path.startswith(import_path + ".") and
                   path.rsplit(".", 1)[0] == import_path for path in self.imports.values())

    def need(self, import_path: str, name: str | None = None) -> str:
        """A local spelling of a module (or of ``name`` from it), adding an import when needed.

        A name joins an existing ``from import_path import ...`` line when there is one.
        """
        full = f"{import_path}.{name}" if name else import_path
        exact = next((local for local, path in self.imports.items() if path == full and not local.startswith("*")),
                     None)
        if exact is not None:
            return exact
        if name is None:
            found = self.alias(import_path)
            if found is not None:
                return found
            short = {"torch.distributed": "dist"}.get(import_path)
            if short is None:
                raise CannotPatch(f"{import_path} is not imported")
            self._add_import_line(f"import {import_path} as {short}")
            self.imports[short] = import_path
            return short
        module_alias = next((local for local, path in self.imports.items() if path == import_path), None)
        if module_alias is not None:
            return f"{module_alias}.{name}"
        existing = [node for node in self.module.body
                    if m.matches(node, m.SimpleStatementLine(body=[m.ImportFrom()]))
                    and dotted(node.body[0].module) == import_path and not node.body[0].relative
                    and not isinstance(node.body[0].names, cst.ImportStar)]
        self.imports[name] = full
        if existing and existing[0].body[0] not in self.replacements:
            def add(node: cst.ImportFrom) -> cst.ImportFrom:
                names = list(node.names)
                names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                names.append(cst.ImportAlias(cst.Name(name)))
                return node.with_changes(names=sorted(names, key=lambda a: dotted(a.name) or "") if
                                         _sorted(node.names) else names)
            self.replacements[existing[0].body[0]] = lambda node: _fix_commas(add(node))
        else:
            self._add_import_line(f"from {import_path} import {name}")
        return name

    def _add_import_line(self, line: str) -> None:
        if line not in self.new_imports:
            self.new_imports.append(line)

    def fresh_name(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken_names:
            k += 1
            name = f"{base}{k}"
        self.taken_names.add(name)
        return name

    # -- recording edits -------------------------------------------------------------------
    def replace(self, node: cst.CSTNode, new: cst.CSTNode | Callable[[cst.CSTNode], cst.CSTNode]) -> None:
        """Replace ``node``; a function of the node (as already edited inside) composes with inner edits."""
        if node in self.replacements:
            raise CannotPatch("two changes replace the same code")
        if not callable(new):
            for other in self.replacements:
                if self._inside(other, node):
                    raise CannotPatch("two changes touch the same expression")
        self.replacements[node] = new

    def checkpoint(self) -> tuple:
        return (dict(self.replacements), {k: list(v) for k, v in self.before.items()},
                {k: list(v) for k, v in self.after.items()}, set(self.removed), list(self.new_imports),
                set(self.taken_names), dict(self.imports), list(self.notes))

    def restore(self, state: tuple) -> None:
        (self.replacements, self.before, self.after, self.removed, self.new_imports, self.taken_names,
         self.imports, self.notes) = state

    def _inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        current = self.parents.get(node)
        while current is not None:
            if current is container:
                return True
            current = self.parents.get(current)
        return False

    def insert_after(self, statement: cst.CSTNode, *code: str) -> None:
        self.block_of(statement)
        self.after.setdefault(statement, []).extend(cst.parse_statement(c) for c in code)

    def insert_before(self, statement: cst.CSTNode, *code: str) -> None:
        self.block_of(statement)
        self.before.setdefault(statement, []).extend(cst.parse_statement(c) for c in code)

    def remove(self, statement: cst.CSTNode) -> None:
        self.block_of(statement)
        self.removed.add(statement)

    def parse_expression(self, code: str) -> cst.BaseExpression:
        return cst.parse_expression(code)

    # -- result ---------------------------------------------------------------------------
    def render(self) -> str:
        editor = self

        class Apply(cst.CSTTransformer):
            def on_leave(self, original, updated):
                if original in editor.replacements:
                    new = editor.replacements[original]
                    return new(updated) if callable(new) else new
                if isinstance(original, (cst.IndentedBlock, cst.Module)):
                    body = []
                    for old, new in zip(original.body, updated.body):
                        body.extend(editor.before.get(old, []))
                        if old not in editor.removed:
                            body.append(new)
                        body.extend(editor.after.get(old, []))
                    if not body and isinstance(original, cst.IndentedBlock):
                        body = [cst.SimpleStatementLine([cst.Pass()])]
                    return updated.with_changes(body=body)
                return updated

        tree = self.module.visit(Apply())
        text = tree.code
        if self.new_imports:
            text = _add_imports(text, self.new_imports)
        return text

    def diff(self) -> str:
        return unified_diff(self.source, self.render(), self.path)


def _sorted(names) -> bool:
    keys = [dotted(a.name) or "" for a in names]
    return keys == sorted(keys)


def _fix_commas(node: cst.ImportFrom) -> cst.ImportFrom:
    """Commas between names, none after the last (unless the names are parenthesised)."""
    names = list(node.names)
    for index, alias in enumerate(names):
        last = index == len(names) - 1
        if last and node.lpar is None:
            names[index] = alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        elif not last and alias.comma is cst.MaybeSentinel.DEFAULT:
            names[index] = alias.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return node.with_changes(names=names)


def _add_imports(text: str, lines: list[str]) -> str:
    """New imports go after the file's last top-level import."""
    module = cst.parse_module(text)
    last = -1
    for index, statement in enumerate(module.body):
        if m.matches(statement, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])):
            last = index
    body = list(module.body)
    body[last + 1:last + 1] = [cst.parse_statement(line) for line in lines]
    return module.with_changes(body=body).code
