"""Source lines for the statements of a PrimFunc TileLang built.

TileLang's parser keeps a span for the PrimFunc only (its ``def`` line), not for the
statements (checked on 0.1.15: every statement's ``span`` is None), so each lifted statement is paired with the statement of the kernel's source
that makes it: a ``for`` per loop variable, ``X[...] = ...`` per store into ``X``,
``T.copy(src, dst)`` per copy into ``dst``, ``T.gemm``/``T.reduce_*``/``T.clear``/``T.fill``
per tile op on their destination, ``if``/``while``/``with T.Kernel``.  Both sides are listed
in program order and aligned as sequences (a branch the parser decided, a macro's body), so a
statement the source does not show keeps the line of the statement around it.
"""
from __future__ import annotations

import ast
import difflib
import re
from dataclasses import replace

from .program import GridLaunch, If, Kernel, Loop, Stmt, Store, TileOp, While, walk_stmts

_TILE_KINDS = {"copy": ("copy", 1), "clear": ("fill", 0), "fill": ("fill", 0), "gemm": ("gemm", 2),
               "wgmma_gemm": ("gemm", 2), "tcgen05_gemm": ("gemm", 2), "atomic_add": ("atomic", 0),
               "im2col": ("loop", None)}


def _base(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)) and not (
            isinstance(node, ast.Attribute) and node.attr == "data"):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _source_items(tree: ast.AST) -> list[tuple[tuple, int]]:
    """(signature, line) for every statement of the source that makes a lifted statement."""
    items: list[tuple[tuple, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            line = node.lineno
            if isinstance(node, ast.For):
                targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
                items.extend((("loop", t.id), line) for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.While):
                items.append((("while",), line))
            elif isinstance(node, ast.If):
                items.append((("if",), line))
            elif isinstance(node, ast.With) and any("Kernel" in ast.unparse(i.context_expr) for i in node.items):
                items.append((("launch",), line))
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Subscript) and _base(target):
                        items.append((("store", _base(target)), line))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                call = node.value
                name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
                if name.startswith("reduce_"):
                    kind, position = "reduce", 1
                else:
                    kind, position = _TILE_KINDS.get(name, (None, None))
                if kind == "loop":
                    items.append((("im2col",), line))
                elif kind is not None and position is not None and len(call.args) > position:
                    items.append(((kind, _base(call.args[position])), line))
            for field in ("body", "orelse"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(node, ast.ClassDef):
                    visit(inner)
    visit(tree.body if isinstance(tree, (ast.Module, ast.FunctionDef)) else [tree])
    return items


def _signature(stmt: Stmt) -> tuple:
    if isinstance(stmt, Loop):
        if stmt.var.startswith("im2col_"):
            return ("im2col",) if stmt.var.endswith("_i") else ("inner",)
        return ("loop", re.sub(r"(_from_0|_\d+)$", "", stmt.var))
    if isinstance(stmt, While):
        return ("while",)
    if isinstance(stmt, If):
        return ("if",)
    if isinstance(stmt, GridLaunch):
        return ("launch",)
    if isinstance(stmt, Store):
        return ("atomic" if stmt.atomic else "store", stmt.buffer)
    if isinstance(stmt, TileOp):
        position = {"copy": 1, "fill": 0, "gemm": 2, "reduce": 1, "atomic_add": 1}.get(stmt.kind)
        kind = "atomic" if stmt.kind == "atomic_add" else stmt.kind
        operand = stmt.operands[position] if position is not None and len(stmt.operands) > position else None
        return (kind, getattr(operand, "buffer", None))
    return ("other",)


def _kernel_function(tree: ast.Module, line: int | None) -> ast.AST:
    """The function defined at ``line`` (its ``def`` or a decorator), else the whole file."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if line is not None and first <= line <= node.lineno:
                return node
    return tree


def attach_lines(kernel: Kernel, source: str, def_line: int | None) -> Kernel:
    """``kernel`` with each statement's source line (aligned as described above)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return kernel
    items = _source_items(_kernel_function(tree, def_line))
    if not items:
        return kernel
    ours = list(walk_stmts(kernel.body))
    matcher = difflib.SequenceMatcher(a=[_signature(s) for s in ours], b=[sig for sig, _ in items], autojunk=False)
    lines: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            lines[id(ours[block.a + offset])] = items[block.b + offset][1]

    def relabel(stmts: tuple[Stmt, ...], outer: int | None) -> tuple[Stmt, ...]:
        out = []
        for stmt in stmts:
            line = lines.get(id(stmt), outer if stmt.line is None else stmt.line)
            if isinstance(stmt, (Loop, While, GridLaunch)):
                stmt = replace(stmt, body=relabel(stmt.body, line), line=line)
            elif isinstance(stmt, If):
                stmt = replace(stmt, then=relabel(stmt.then, line), orelse=relabel(stmt.orelse, line), line=line)
            else:
                stmt = replace(stmt, line=line)
            out.append(stmt)
        return tuple(out)
    launches = [line for sig, line in items if sig == ("launch",)]
    return replace(kernel, body=relabel(kernel.body, None), grid_line=launches[0] if launches else kernel.grid_line,
                   columns=statement_columns(_kernel_function(tree, def_line)))


def statement_columns(tree: ast.AST) -> tuple[tuple[int, int], ...]:
    """(line, 1-based column) of the first statement starting on each line."""
    found: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.lineno, node.col_offset + 1)
            found[node.lineno] = min(found[node.lineno], node.col_offset + 1)
    return tuple(sorted(found.items()))
