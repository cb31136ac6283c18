"""Size expressions written as text (``"4"``, ``"N // tp + 1"``), read without evaluating them.

Text from a user's file or a model's answer is data: it is never handed to ``eval``, ``exec``
or ``sympy.sympify`` (which evaluates Python).  This module is a grammar of its own:

    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/" | "//" | "%") unary)*
    unary  := "-" unary | "+" unary | power
    power  := atom ("**" unary)?
    atom   := INT | NAME | "(" expr ")"

with limits on length, nesting depth and literal size, checked before any work is done.
The result is a small tree; ``fold`` turns it into whatever numbers the caller uses
(sympy expressions in the frontends, z3 terms or ints elsewhere).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, TypeVar, Union

MAX_LENGTH = 256
MAX_DEPTH = 32
MAX_DIGITS = 24
MAX_EXPONENT = 64

_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op>\*\*|//|[-+*/%()]))")


class SizeExprError(ValueError):
    """The text is not a size expression; ``column`` is 1-based."""

    def __init__(self, text: str, column: int, expected: str):
        self.text, self.column, self.expected = text, column, expected
        shown = text if len(text) <= 60 else text[:57] + "..."
        super().__init__(f"expected a size expression (ints, names, + - * / // % **), "
                         f"got {shown!r}: col {column}: expected {expected}")


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Name:
    id: str


@dataclass(frozen=True)
class Neg:
    operand: "Node"


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * / // % **
    left: "Node"
    right: "Node"


Node = Union[Num, Name, Neg, BinOp]


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            column = pos + 1 + (len(text[pos:]) - len(text[pos:].lstrip()))
            raise SizeExprError(text, column, "an int, a name, an operator or a parenthesis")
        kind = match.lastgroup
        out.append((kind, match.group(kind), match.start(kind) + 1))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.index = 0
        self.depth = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take_op(self, *ops: str) -> str | None:
        token = self.peek()
        if token is not None and token[0] == "op" and token[1] in ops:
            self.index += 1
            return token[1]
        return None

    def column(self) -> int:
        token = self.peek()
        return token[2] if token is not None else len(self.text) + 1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SizeExprError(self.text, self.column(), f"at most {MAX_DEPTH} levels of nesting")

    def expr(self) -> Node:
        self.enter()
        node = self.term()
        while (op := self.take_op("+", "-")) is not None:
            node = BinOp(op, node, self.term())
        self.depth -= 1
        return node

    def term(self) -> Node:
        node = self.unary()
        while (op := self.take_op("*", "/", "//", "%")) is not None:
            node = BinOp(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if (op := self.take_op("-", "+")) is not None:
            self.enter()
            operand = self.unary()
            self.depth -= 1
            return Neg(operand) if op == "-" else operand
        return self.power()

    def power(self) -> Node:
        base = self.atom()
        if self.take_op("**") is None:
            return base
        column = self.column()
        self.enter()
        exponent = self.unary()
        self.depth -= 1
        if not isinstance(exponent, Num) or exponent.value > MAX_EXPONENT:
            raise SizeExprError(self.text, column, f"an int exponent of at most {MAX_EXPONENT}")
        return BinOp("**", base, exponent)

    def atom(self) -> Node:
        token = self.peek()
        if token is None:
            raise SizeExprError(self.text, self.column(), "an int, a name or '('")
        kind, value, column = token
        if kind == "int":
            if len(value) > MAX_DIGITS:
                raise SizeExprError(self.text, column, f"an int of at most {MAX_DIGITS} digits")
            self.index += 1
            return Num(int(value))
        if kind == "name":
            self.index += 1
            return Name(value)
        if self.take_op("("):
            node = self.expr()
            if self.take_op(")") is None:
                raise SizeExprError(self.text, self.column(), "')'")
            return node
        raise SizeExprError(self.text, column, "an int, a name or '('")


def parse_size_expr(text: str) -> Node:
    """The tree of ``text``; ``SizeExprError`` for anything outside the grammar or its limits."""
    if not isinstance(text, str):
        raise TypeError("parse_size_expr reads text")
    if len(text) > MAX_LENGTH:
        raise SizeExprError(text, MAX_LENGTH + 1, f"at most {MAX_LENGTH} characters")
    parser = _Parser(text)
    if not parser.tokens:
        raise SizeExprError(text, 1, "an int, a name or '('")
    node = parser.expr()
    if parser.peek() is not None:
        raise SizeExprError(text, parser.column(), "an operator or the end of the expression")
    return node


T = TypeVar("T")


def fold(node: Node, number: Callable[[int], T], name: Callable[[str], T],
         binary: Callable[[str, T, T], T], negate: Callable[[T], T]) -> T:
    """Evaluate the tree bottom-up with the caller's own arithmetic."""
    if isinstance(node, Num):
        return number(node.value)
    if isinstance(node, Name):
        return name(node.id)
    if isinstance(node, Neg):
        return negate(fold(node.operand, number, name, binary, negate))
    return binary(node.op, fold(node.left, number, name, binary, negate),
                  fold(node.right, number, name, binary, negate))
