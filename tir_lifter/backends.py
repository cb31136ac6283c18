"""Value algebras the interpreter runs a kernel over: floats, or Z3 terms.

The interpreter computes every index concretely (sizes are concrete after reduction) and
hands element *values* to a backend.  The float backend re-checks counterexamples by
plain evaluation; the Z3 backend builds terms for the proof.  This is the one place
(with ``checks.py``) that talks to Z3.

Encoding choices (DESIGN.md, "what verified means"): arithmetic is exact over the reals
(floating-point rounding and dtype casts are not modelled); ``max``/``min`` are exact
(``If``); transcendental functions are uninterpreted functions of exactly the values they
read, so a proof with them holds for every interpretation, including the real one.
"""
from __future__ import annotations

import math
from typing import Any

import z3


class NegInf:
    """-inf as a reduction identity (``T.fill(m, -T.infinity(dtype))``), kept out of Z3."""

    def __repr__(self) -> str:
        return "-inf"


class PosInf:
    def __repr__(self) -> str:
        return "inf"


NEG_INF, POS_INF = NegInf(), PosInf()


class InfinityArithmetic(Exception):
    """An infinity reached an operation other than max/min; the Z3 encoding stops here."""


class FloatBackend:
    """Plain float64 evaluation, used to confirm counterexamples."""

    name = "float"

    def const(self, value: Any) -> Any:
        return float(value)

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    def div(self, a: Any, b: Any) -> Any:
        if b == 0:
            return math.copysign(math.inf, a) if a else math.nan
        return a / b

    def neg(self, a: Any) -> Any:
        return -a

    def max(self, a: Any, b: Any) -> Any:
        return a if a >= b else b

    def min(self, a: Any, b: Any) -> Any:
        return a if a <= b else b

    def compare(self, op: str, a: Any, b: Any) -> Any:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]

    def logic(self, op: str, a: Any, b: Any) -> Any:
        return (a and b) if op == "and" else (a or b)

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        return a if cond else b

    def call(self, fn: str, args: list[Any]) -> Any:
        x = args[0]
        table = {"exp": lambda v: math.exp(min(v, 700.0)), "exp2": lambda v: 2.0 ** min(v, 1000.0),
                 "log": lambda v: math.log(v) if v > 0 else -math.inf,
                 "log2": lambda v: math.log2(v) if v > 0 else -math.inf,
                 "sqrt": lambda v: math.sqrt(v) if v >= 0 else math.nan,
                 "rsqrt": lambda v: 1.0 / math.sqrt(v) if v > 0 else math.inf,
                 "abs": abs, "tanh": math.tanh, "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-min(max(v, -700), 700)))}
        return table[fn](x)


class Z3Backend:
    """Exact real arithmetic with uninterpreted transcendental functions."""

    name = "z3"

    def __init__(self) -> None:
        self._functions: dict[str, z3.FuncDeclRef] = {}

    def const(self, value: Any) -> Any:
        if isinstance(value, float) and math.isinf(value):
            return NEG_INF if value < 0 else POS_INF
        if isinstance(value, bool):
            return z3.BoolVal(value)
        return z3.RealVal(value)

    def _finite(self, *values: Any) -> None:
        if any(isinstance(v, (NegInf, PosInf)) for v in values):
            raise InfinityArithmetic()

    def add(self, a: Any, b: Any) -> Any:
        self._finite(a, b)
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        self._finite(a, b)
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        self._finite(a, b)
        return a * b

    def div(self, a: Any, b: Any) -> Any:
        self._finite(a, b)
        return a / b

    def neg(self, a: Any) -> Any:
        if isinstance(a, PosInf):
            return NEG_INF
        if isinstance(a, NegInf):
            return POS_INF
        return -a

    def max(self, a: Any, b: Any) -> Any:
        if isinstance(a, NegInf) or isinstance(b, PosInf):
            return b
        if isinstance(b, NegInf) or isinstance(a, PosInf):
            return a
        return z3.If(a >= b, a, b)

    def min(self, a: Any, b: Any) -> Any:
        if isinstance(a, PosInf) or isinstance(b, NegInf):
            return b
        if isinstance(b, PosInf) or isinstance(a, NegInf):
            return a
        return z3.If(a <= b, a, b)

    def compare(self, op: str, a: Any, b: Any) -> Any:
        self._finite(a, b)
        return {"<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
                "==": lambda: a == b, "!=": lambda: a != b}[op]()

    def logic(self, op: str, a: Any, b: Any) -> Any:
        return z3.And(a, b) if op == "and" else z3.Or(a, b)

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        self._finite(a, b)
        return z3.If(cond, a, b)

    def call(self, fn: str, args: list[Any]) -> Any:
        self._finite(*args)
        if fn == "abs":
            return z3.If(args[0] >= 0, args[0], -args[0])
        if fn not in self._functions:  # the verifier's name for a unary function: a traced reference's exp is ours
            self._functions[fn] = z3.Function(f"{fn}_1_0", z3.RealSort(), z3.RealSort())
        return self._functions[fn](args[0])
