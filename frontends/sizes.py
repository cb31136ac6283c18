"""Numbers and sizes as sympy expressions, without ever evaluating text.

``sympy.sympify`` runs ``eval`` on strings (and on the ``str()`` of objects it does not know),
so a string in the user's file where a size is expected (``torch.zeros("__import__('os')...")``)
would run.  ``to_sym`` is the frontends' only way into sympy: text goes through the restricted
grammar of ``verifier.size_expr``; other values through ``sympify(strict=True)``, which never
parses text.
"""
from __future__ import annotations

from typing import Any

import sympy as sp

from verifier.size_expr import SizeExprError, fold, parse_size_expr

from .values import UserError


def _binary(op: str, a: sp.Expr, b: sp.Expr) -> sp.Expr:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    if op == "//":
        return sp.floor(a / b)
    if op == "%":
        return sp.Mod(a, b)
    return a ** b


def sym_from_text(text: str) -> sp.Expr:
    """A size written as text (``"4"``, ``"2*8"``), read with the restricted grammar (never evaluated)."""
    try:
        tree = parse_size_expr(text)
    except SizeExprError as error:
        raise UserError(None, str(error)) from None
    def no_names(name: str) -> sp.Expr:
        # A Python string names no variable: "N" in torch.zeros("N") is text, not the constant N.
        raise UserError(None, f"expected a size, got the text {text!r} (a string; write the number or the name "
                              f"without quotes)")

    try:
        return fold(tree, sp.Integer, no_names, _binary, lambda a: -a)
    except ZeroDivisionError:
        raise UserError(None, f"size expression {text!r} divides by zero") from None


def to_sym(value: Any) -> Any:
    """``value`` as a sympy object; drop-in for ``sp.sympify`` that never evaluates text."""
    if value is None or isinstance(value, sp.Basic):
        return value
    if isinstance(value, str):
        return sym_from_text(value)
    if isinstance(value, (list, tuple)):
        return type(value)(to_sym(item) for item in value)
    try:
        return sp.sympify(value, strict=True)
    except (sp.SympifyError, TypeError):
        shown = type(value).__name__
        raise UserError(None, f"expected a number or a size, got a {shown}") from None
