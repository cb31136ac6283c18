"""Where a missing ``wait()`` goes, from the recording's async finding and the checked file's statements.

The async check (``verifier/temporal/async_check.py``) records, for a handle read too early or never waited
on, the line of the async op and the line of the first op that read its buffer.  A removed wait leaves no op
at its place, so the finding's own line is the read (or the op); the repair is an insertion, and its line is
the one it inserts after (as a patch's first changed line):

* the buffer read later in the function that issued the op: right before that read, after the statement
  before it in the op's block (the read's statement, or the statement of that block holding it);
* read in another function of the file, when the issuing function calls none of the file's functions (so the
  read ran after it returned) and does not hand the handle back: before that function's only ``return``;
* never waited on, the handle kept nowhere: at the end of the block that issued it, before a closing
  ``return``.

Anything else (a handle returned or stored, several returns, a read before the op, statements that do not
parse) names no line.
"""
from __future__ import annotations

import ast

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = ("body", "orelse", "finalbody", "handlers")


def wait_repair_line(source: str, issued: int, read: int | None) -> int | None:
    """The line after which the missing wait of the async op at ``issued`` goes (``read``: the line of the
    first early read of its buffer, None when the handle is never waited on); None when the statements do
    not say."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    function = _innermost_function(tree, issued)
    if function is None:
        return None
    place = _block_of(function, issued)
    if place is None:
        return None
    block, index = place
    handles = _bound(block[index])
    if _escapes(function, handles):
        return None
    if read is None:
        last = len(block) - 1
        if isinstance(block[last], ast.Return):
            last -= 1
        return block[last].end_lineno if last >= index else None
    if _innermost_function(tree, read) is function:
        return _before(block, index, read) if read > block[index].end_lineno else None
    if _calls_own_function(tree, function):
        return None
    returns = [node for node in _own_nodes(function) if isinstance(node, ast.Return)]
    if len(returns) != 1:
        return None
    return _before(block, index, returns[0].lineno)


def _before(block: list[ast.stmt], index: int, line: int) -> int | None:
    """The last line of the statement before the one of ``block`` (after ``index``) holding ``line``."""
    for at in range(index + 1, len(block)):
        if block[at].lineno <= line <= block[at].end_lineno:
            return block[at - 1].end_lineno
    return None


def _innermost_function(tree: ast.AST, line: int) -> ast.AST | None:
    found = None
    for node in ast.walk(tree):
        if isinstance(node, _FUNCTIONS) and node.lineno <= line <= node.end_lineno:
            if found is None or node.lineno >= found.lineno:
                found = node
    return found


def _block_of(function: ast.AST, line: int) -> tuple[list[ast.stmt], int] | None:
    """The innermost block of ``function`` (not of a nested function) with a statement holding ``line``, and
    that statement's index."""
    found = None
    stack = [function]
    while stack:
        node = stack.pop()
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for index, stmt in enumerate(block):
                if isinstance(stmt, ast.stmt) and stmt.lineno <= line <= stmt.end_lineno:
                    found = (block, index)
                    if not isinstance(stmt, _FUNCTIONS + (ast.ClassDef,)):
                        stack.append(stmt)
                elif isinstance(stmt, ast.ExceptHandler) and stmt.lineno <= line <= stmt.end_lineno:
                    stack.append(stmt)
    return found


def _bound(stmt: ast.stmt) -> set[str]:
    """The names a statement binds (``work = dist.irecv(...)``, ``reqs = [...]``)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def _escapes(function: ast.AST, names: set[str]) -> bool:
    """A handle kept beyond the function: returned, yielded, stored on an object or in a container, or made
    global."""
    for node in _own_nodes(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None and \
                any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node.value)):
            return True
        if isinstance(node, ast.Assign) and any(not isinstance(t, ast.Name) for t in node.targets) and \
                any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node.value)):
            return True
        if isinstance(node, ast.Call) and any(isinstance(n, ast.Name) and n.id in names
                                              for arg in [*node.args, *(k.value for k in node.keywords)]
                                              for n in ast.walk(arg)):
            return True
    return False


def _own_nodes(function: ast.AST):
    """The nodes of ``function``'s own body, not of functions or classes defined inside it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _FUNCTIONS + (ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _calls_own_function(tree: ast.AST, function: ast.AST) -> bool:
    """``function`` calls a function or method the file defines (by its name), so a read in another function
    of the file may run before it returns."""
    defined = {node.name for node in ast.walk(tree) if isinstance(node, _FUNCTIONS + (ast.ClassDef,))}
    for node in _own_nodes(function):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in defined:
                return True
    return False
