"""Evaluate the rank expressions of ``when=`` and ``peer=`` for one concrete rank.

Control flow on rank is unrolled per rank, so these expressions only ever meet integers:
the mesh coordinates of the rank (``tp``, ``dp``), ``rank`` (global rank), ``world``
(number of ranks) and ``<dim>_size`` (size of a mesh dim).  A tiny AST walker keeps
``eval`` out of the tool and turns anything else into an ``ExprError`` the caller reports
as unsupported, never as a silent pass.
"""
from __future__ import annotations

import ast
import functools
import operator
from typing import Any, Callable, Mapping


class ExprError(ValueError):
    """The expression uses something a per-rank integer evaluation cannot model."""


_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}


def _walk(node: ast.AST, env: Mapping[str, int]) -> Any:
    if isinstance(node, ast.Expression):
        return _walk(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("true", "false"):
            return node.id == "true"
        if node.id not in env:
            raise ExprError(f"unknown name {node.id!r} (known: {', '.join(sorted(env))})")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_walk(node.left, env), _walk(node.right, env))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_walk(node.operand, env))
    if isinstance(node, ast.BoolOp):
        values = [_walk(value, env) for value in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _walk(node.left, env)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in _COMPARE:
                raise ExprError(f"unsupported comparison {type(op).__name__}")
            right = _walk(right_node, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise ExprError(f"unsupported syntax {type(node).__name__}")


@functools.lru_cache(maxsize=4096)
def _parse(expr: str) -> ast.Expression:
    """Parsed once per distinct expression: the same ``when`` is evaluated on every rank."""
    text = expr.replace("&&", " and ").replace("||", " or ")
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse {expr!r}") from exc


def evaluate(expr: Any, env: Mapping[str, int]) -> Any:
    """Value of ``expr`` (an int, a bool or expression text) for one rank's ``env``."""
    if isinstance(expr, (bool, int)):
        return expr
    if not isinstance(expr, str):
        raise ExprError(f"expected an integer expression, got {expr!r}")
    try:
        return _walk(_parse(expr), env)
    except ZeroDivisionError as exc:
        raise ExprError(f"division by zero in {expr!r}") from exc
