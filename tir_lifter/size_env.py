"""Where a kernel's sizes come from: module constants, factory parameters and call sites.

TileLang kernels are usually built by a Python *factory*::

    def matmul(M, N, K, block_M, block_N, block_K, dtype="float16"):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), ...): ...
        return main

    func = matmul(1024, 1024, 1024, 128, 128, 32)

This module reads that Python layer with ``ast`` only (nothing is imported or run): it
binds factory parameters from defaults and from the first call site in the file whose
arguments are constants, and keeps derived sizes (``splitK = K // split_k``) as
expressions so the checker can re-instantiate every size on reduced shapes.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .program import BinOp, Const, Expr, UnOp, Var


@dataclass
class SizeEnv:
    """Names visible to a kernel.  ``symbols`` are integer sizes (kept symbolic, with the
    value the file gives them or None); ``exprs`` are derived sizes; ``values`` are other
    constants (dtype strings, floats)."""

    symbols: dict[str, int | None] = field(default_factory=dict)
    exprs: dict[str, Expr] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def child(self) -> "SizeEnv":
        return SizeEnv(dict(self.symbols), dict(self.exprs), dict(self.values))

    def lookup(self, name: str) -> Expr | Any | None:
        if name in self.exprs:
            return self.exprs[name]
        if name in self.symbols:
            return Var(name)
        return self.values.get(name)


_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Div: "/"}


def const_value(node: ast.AST, env: SizeEnv) -> Any:
    """The Python value of a constant expression (ints, floats, strings, arithmetic over
    known names), or raise KeyError when it is not constant."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env.symbols and env.symbols[node.id] is not None:
            return env.symbols[node.id]
        if node.id in env.values:
            return env.values[node.id]
        if node.id in env.exprs:
            return eval_size(env.exprs[node.id], env.symbols)
        raise KeyError(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -const_value(node.operand, env)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        left, right = const_value(node.left, env), const_value(node.right, env)
        return _apply(_ARITH[type(node.op)], left, right)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("T", "torch"):
        return node.attr  # T.float16, torch.float32 used as dtypes
    raise KeyError(ast.dump(node)[:40])


def _apply(op: str, left: Any, right: Any) -> Any:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op == "//":
        return left // right
    if op == "%":
        return left % right
    if op in _INT_BITS:
        return int_bits(op, left, right)
    return left / right


# bit operations on integers (two's complement, as Python's ints give them); the caller wraps the
# result to its dtype
_INT_BITS = ("<<", ">>", "&", "|", "^")


def int_bits(op: str, left: int, right: int) -> int:
    """``left op right`` on integers, exactly as CUDA computes it before the wrap to the dtype; a
    shift by a negative amount or by 64 or more (undefined in C) is refused."""
    from .errors import Unsupported
    if op in ("<<", ">>") and not 0 <= right < 64:
        raise Unsupported(None, f"a shift by {right} (undefined in C) is not modelled")
    return {"<<": lambda: left << right, ">>": lambda: left >> right, "&": lambda: left & right,
            "|": lambda: left | right, "^": lambda: left ^ right}[op]()


def size_expr(node: ast.AST, env: SizeEnv) -> Expr:
    """A size expression over the env's symbols (raise KeyError if not one)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Const(node.value)
    if isinstance(node, ast.Name):
        found = env.lookup(node.id)
        if isinstance(found, (Var, BinOp, Const, UnOp)):
            return found
        if isinstance(found, int) and not isinstance(found, bool):
            return Const(found)
        raise KeyError(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH and not isinstance(node.op, ast.Div):
        return BinOp(_ARITH[type(node.op)], size_expr(node.left, env), size_expr(node.right, env))
    if isinstance(node, ast.Call) and _dotted(node.func) in ("T.ceildiv", "tilelang.cdiv", "T.cdiv") and len(node.args) == 2:
        return BinOp("ceildiv", size_expr(node.args[0], env), size_expr(node.args[1], env))
    raise KeyError(ast.dump(node)[:40])


def eval_size(expr: Expr, values: dict[str, int | None]) -> int:
    """Evaluate a size expression with integer symbol values."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        value = values.get(expr.name)
        if value is None:
            raise KeyError(expr.name)
        return value
    if isinstance(expr, UnOp):
        return -eval_size(expr.a, values)
    if isinstance(expr, BinOp):
        a, b = eval_size(expr.a, values), eval_size(expr.b, values)
        if expr.op == "ceildiv":
            return -(-a // b)
        if expr.op == "min":
            return min(a, b)
        if expr.op == "max":
            return max(a, b)
        return _apply(expr.op, a, b)
    raise KeyError(str(expr))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def module_env(tree: ast.Module) -> SizeEnv:
    """Module-level constants: ``M = 1024``, ``dtype = "float16"``, ``N = 2 * M``."""
    env = SizeEnv()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            _bind_local(env, stmt)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            _bind(env, stmt.target.id, stmt.value)
    return env


def _bind(env: SizeEnv, name: str, value_node: ast.AST) -> None:
    try:
        value = const_value(value_node, env)
    except (KeyError, ZeroDivisionError, TypeError):
        try:
            env.exprs[name] = size_expr(value_node, env)
        except KeyError:
            pass
        return
    if isinstance(value, int) and not isinstance(value, bool):
        env.symbols[name] = value
    else:
        env.values[name] = value


def factory_env(factory: ast.FunctionDef, outer: SizeEnv, call: ast.Call | None) -> SizeEnv:
    """Bind a factory's parameters (call-site arguments, then defaults, else unbound
    symbols) and its simple body assignments (``splitK = K // split_k``)."""
    env = outer.child()
    params = factory.args.args + factory.args.kwonlyargs
    defaults: dict[str, ast.AST] = {}
    positional = factory.args.args
    for param, default in zip(positional[len(positional) - len(factory.args.defaults):], factory.args.defaults):
        defaults[param.arg] = default
    for param, default in zip(factory.args.kwonlyargs, factory.args.kw_defaults):
        if default is not None:
            defaults[param.arg] = default
    given: dict[str, ast.AST] = {}
    if call is not None:
        for param, arg in zip(positional, call.args):
            given[param.arg] = arg
        for keyword in call.keywords:
            if keyword.arg:
                given[keyword.arg] = keyword.value
    for param in params:
        name = param.arg
        env.symbols.pop(name, None)
        env.values.pop(name, None)
        env.exprs.pop(name, None)
        node = given.get(name, defaults.get(name))
        if node is None:
            env.symbols[name] = None
            continue
        try:
            value = const_value(node, outer)
        except (KeyError, ZeroDivisionError, TypeError):
            env.symbols[name] = None
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            env.symbols[name] = value
        else:
            env.values[name] = value
    for stmt in factory.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            _bind_derived(env, stmt.targets[0].id, stmt.value)
    return env


def _bind_derived(env: SizeEnv, name: str, node: ast.AST) -> None:
    """Inside a factory, integer assignments over parameters stay expressions."""
    try:
        env.exprs[name] = size_expr(node, env)
        return
    except KeyError:
        pass
    try:
        value = const_value(node, env)
    except (KeyError, ZeroDivisionError, TypeError):
        return
    if not isinstance(value, int) or isinstance(value, bool):
        env.values[name] = value


def find_call(tree: ast.Module, factory_name: str, env: SizeEnv) -> ast.Call | None:
    """The first call of ``factory_name`` in the file whose arguments are constants of its
    scope (module constants, or simple assignments in the calling function such as
    ``M, N, K = 1024, 1024, 1024`` in a ``main()``)."""
    scopes: list[tuple[ast.AST, SizeEnv]] = [(tree, env)]
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            local = env.child()
            for stmt in node.body:
                _bind_local(local, stmt)
            scopes.append((node, local))
    for scope, scope_env in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and _dotted(node.func) == factory_name:
                try:
                    for arg in list(node.args) + [k.value for k in node.keywords]:
                        const_value(arg, scope_env)
                except (KeyError, ZeroDivisionError, TypeError):
                    continue
                return _with_constants(node, scope_env)
    return None


def _bind_local(env: SizeEnv, stmt: ast.stmt) -> None:
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return
    target = stmt.targets[0]
    if isinstance(target, ast.Name):
        _bind(env, target.id, stmt.value)
    elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
        for name, value in zip(target.elts, stmt.value.elts):
            if isinstance(name, ast.Name):
                _bind(env, name.id, value)


def _with_constants(call: ast.Call, env: SizeEnv) -> ast.Call:
    """The call with its arguments folded to literals, so callers need no scope."""
    args = [ast.Constant(const_value(arg, env)) for arg in call.args]
    keywords = [ast.keyword(k.arg, ast.Constant(const_value(k.value, env))) for k in call.keywords]
    return ast.Call(func=call.func, args=args, keywords=keywords)
