"""Reading a Python file with ``ast``: imports, module constants, and one walk that records
every function and every call with its context (inside a loop? under a condition that does not
depend on the rank?).  Shared by ``source_facts.py`` and ``sites.py``; never executes the file.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass


def imports(tree: ast.Module) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = dotted(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


def last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def target_names(target: ast.AST) -> list[str]:
    if isinstance(target, (ast.Name, ast.Attribute)):
        return [last_name(target)]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for item in target.elts for n in target_names(item)]
    return []


def module_constants(tree: ast.Module) -> dict[str, int]:
    env: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = (list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                 and len(target.elts) == len(value.elts) else [(target, value)])
        for name_node, expr in pairs:
            if isinstance(name_node, ast.Name):
                number = evaluate_int(expr, env)
                if isinstance(number, int):
                    env[name_node.id] = number
    return env


def evaluate_int(node: ast.AST, env: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = evaluate_int(node.operand, env)
        return -value if value is not None else None
    if isinstance(node, ast.BinOp):
        left, right = evaluate_int(node.left, env), evaluate_int(node.right, env)
        if left is None or right is None:
            return None
        try:
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.FloorDiv):
                return left // right
            if isinstance(node.op, ast.Div):
                return left // right if left % right == 0 else None
            if isinstance(node.op, ast.Mod):
                return left % right
            if isinstance(node.op, ast.Pow):
                return left ** right
        except ZeroDivisionError:
            return None
    return None


def mentions_rank(node: ast.AST) -> bool:
    return "rank" in ast.unparse(node).lower()


# --- the reader --------------------------------------------------------------------------------

@dataclass
class Func:
    key: str  # "name" or "Class.name" or "<lambda>@line"
    name: str
    node: ast.AST
    cls: str | None
    parent: str | None  # enclosing function key
    params: list[str]


@dataclass
class CallSite:
    node: ast.Call
    func_key: str | None  # enclosing function (None: module level)
    in_loop: bool
    conditional: bool


class Reader(ast.NodeVisitor):
    """One walk collecting functions, calls (with loop/condition context) and called nodes."""

    def __init__(self) -> None:
        self.funcs: dict[str, Func] = {}
        self.calls: list[CallSite] = []
        self.scopes: list[tuple[str, str]] = []  # ("class", name) | ("func", key)
        self.loops = [0]
        self.conds = [0]
        self.called_nodes: set[int] = set()

    @property
    def current(self) -> str | None:
        return next((key for kind, key in reversed(self.scopes) if kind == "func"), None)

    def _enter(self, node: ast.AST, name: str, params: list[str]) -> None:
        cls = self.scopes[-1][1] if self.scopes and self.scopes[-1][0] == "class" else None
        key = f"<lambda>@{node.lineno}" if isinstance(node, ast.Lambda) else f"{cls}.{name}" if cls else name
        while key in self.funcs:
            key = f"{key}@{node.lineno}"
        self.funcs[key] = Func(key, name, node, cls, self.current, params)
        self.scopes.append(("func", key))
        self.loops.append(0)
        self.conds.append(0)

    def _leave(self) -> None:
        self.scopes.pop()
        self.loops.pop()
        self.conds.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scopes.append(("class", node.name))
        for item in node.body:
            self.visit(item)
        self.scopes.pop()

    def _function(self, node) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        self._enter(node, node.name, params)
        for item in node.body:
            self.visit(item)
        self._leave()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._enter(node, "<lambda>", [a.arg for a in node.args.args])
        self.visit(node.body)
        self._leave()

    def _loop(self, node) -> None:
        self.loops[-1] += 1
        self.generic_visit(node)
        self.loops[-1] -= 1

    visit_For = visit_AsyncFor = visit_While = visit_ListComp = visit_SetComp = visit_DictComp = \
        visit_GeneratorExp = _loop

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        conditional = not mentions_rank(node.test)
        self.conds[-1] += conditional
        for item in node.body + node.orelse:
            self.visit(item)
        self.conds[-1] -= conditional

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        conditional = not mentions_rank(node.test)
        self.conds[-1] += conditional
        self.visit(node.body)
        self.visit(node.orelse)
        self.conds[-1] -= conditional

    def visit_Try(self, node: ast.Try) -> None:
        for item in node.body + node.finalbody:
            self.visit(item)
        self.conds[-1] += 1
        for handler in node.handlers:
            self.visit(handler)
        for item in node.orelse:
            self.visit(item)
        self.conds[-1] -= 1

    def visit_Call(self, node: ast.Call) -> None:
        self.called_nodes.add(id(node.func))
        self.calls.append(CallSite(node, self.current, self.loops[-1] > 0, self.conds[-1] > 0))
        self.generic_visit(node)


def returned_function(build: Func, reader: Reader) -> Func | None:
    for node in ast.walk(build.node):
        if isinstance(node, ast.Return) and node.value is not None:
            if isinstance(node.value, ast.Name):
                for func in reader.funcs.values():
                    if func.parent == build.key and func.name == node.value.id:
                        return func
            if isinstance(node.value, ast.Lambda):
                return next((f for f in reader.funcs.values() if f.node is node.value), None)
    return None
