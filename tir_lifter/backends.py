"""Value algebras the interpreter runs a kernel over: floats, or Z3 terms.

The interpreter computes every index concretely (sizes are concrete after reduction) and
hands element *values* to a backend.  The float backend re-checks counterexamples by
plain evaluation; the Z3 backend builds terms for the proof.  This is the one place
(with ``checks.py``) that talks to Z3.

Encoding choices (DESIGN.md, "what verified means"): arithmetic is exact over the reals
(floating-point rounding is not modelled); dtype conversions are the registry's ``convert``
rule (truncation toward zero to integers, saturation to fp8), evaluated with the verifier's
NumPy or Z3 backend so the proof and the concrete re-check agree; ``max``/``min`` are exact
(``If``); transcendental functions are uninterpreted functions of exactly the values they
read, so a proof with them holds for every interpretation, including the real one.
Infinities are constants of the kernel (reduction identities, masks), decided concretely.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import z3

from verifier.term_walk import uninterpreted_declarations


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


def _convert_rule(xp: Any, value: Any, source: str, target: str) -> Any:
    import numpy as np

    from verifier.registry import get_rule
    array = np.empty((1,), dtype=object if xp.symbolic else None)
    array[0] = value
    return get_rule("convert").evaluate(xp, [array if xp.symbolic else array.astype(float)],
                                        {"dtype": target, "source": source}, None)[0][0]


_FORMATS = ("float16", "bfloat16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz")


def _roundings(term: Any, kept: bool) -> list:
    return rounding_functions(uninterpreted_declarations([term]), kept)


def rounding_functions(found: list, kept: bool) -> list:
    """Of the declarations ``found``, the roundings to narrow floats (``kept``: those no proof takes as the identity)."""
    from verifier.backends import rounding_function
    names = {str(d) for d in found}
    return [rounding_function(fmt, kept) for fmt in _FORMATS if str(rounding_function(fmt, kept)) in names]


def keep_roundings(term: Any) -> Any:
    """``term`` with each rounding to a narrow float made one no proof takes as the identity
    (of a constant: its exact rounding)."""
    from verifier.backends import rounding_function
    from verifier.rules.casts import round_value
    functions = _roundings(term, kept=False)
    if not functions:
        return term
    constants, seen, stack = [], set(), [term]
    while stack:  # round_<fmt>(numeral): the numeral rounded
        node = stack.pop()
        if not z3.is_app(node) or node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if node.num_args() == 1 and any(node.decl().eq(f) for f in functions) and z3.is_rational_value(node.arg(0)):
            value = round_value(node.arg(0).as_fraction(), str(node.decl()).split("_", 1)[1])
            if math.isfinite(value):
                constants.append((node, z3.RealVal(Fraction(value))))
        stack.extend(node.children())
    term = z3.substitute(term, *constants) if constants else term
    pairs = [(f, rounding_function(str(f).split("_", 1)[1], kept=True)(z3.Var(0, z3.RealSort())))
             for f in functions]
    return z3.substitute_funs(term, *pairs)


def identity_roundings(term: Any, functions: list | None = None) -> tuple[Any, bool]:
    """``term`` with each rounding to a narrow float (other than those kept) as the identity, and
    whether there was one: a value rounded on its way to an output differs from the exact one by
    the format's precision, which the file's tolerance accepts; a rounding that decides a
    discrete value (a conversion to an integer) is kept.  ``functions``: those roundings, when the
    caller found them once for many terms."""
    if not z3.is_expr(term):
        return term, False
    functions = _roundings(term, kept=False) if functions is None else functions
    pairs = [(f, z3.Var(0, z3.RealSort())) for f in functions]
    if not pairs:
        return term, False
    out = z3.substitute_funs(term, *pairs)
    return out, not out.eq(term)


class Rounded(float):
    """A value that went through a conversion to a narrow float, in the float re-check: it is
    the exact value (what the proof takes), and ``rounded`` is the same computation with every
    such rounding applied (what a conversion to an integer reads, as the proof keeps them there)."""

    rounded: float

    def __new__(cls, exact: float, rounded: float) -> "Rounded":
        value = super().__new__(cls, exact)
        value.rounded = rounded
        return value


def _shadowed(method: Any) -> Any:
    """``method`` on exact values, and on the rounded ones alongside when an operand has them."""
    def run(self: Any, *args: Any) -> Any:
        result = method(self, *args)
        if not any(isinstance(a, Rounded) for a in args) or isinstance(result, bool):
            return result
        shadow = method(self, *[a.rounded if isinstance(a, Rounded) else a for a in args])
        return Rounded(result, shadow) if isinstance(result, float) and isinstance(shadow, (int, float)) else result
    return run


class FloatBackend:
    """Plain float64 evaluation, used to confirm counterexamples."""

    name = "float"

    def const(self, value: Any) -> Any:
        return float(value)

    @_shadowed
    def add(self, a: Any, b: Any) -> Any:
        return a + b

    @_shadowed
    def sub(self, a: Any, b: Any) -> Any:
        return a - b

    @_shadowed
    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    @_shadowed
    def div(self, a: Any, b: Any) -> Any:
        if b == 0:
            return math.copysign(math.inf, a) if a else math.nan
        return a / b

    @_shadowed
    def neg(self, a: Any) -> Any:
        return -a

    @_shadowed
    def max(self, a: Any, b: Any) -> Any:
        return a if a >= b else b

    @_shadowed
    def min(self, a: Any, b: Any) -> Any:
        return a if a <= b else b

    def compare(self, op: str, a: Any, b: Any) -> Any:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]

    def logic(self, op: str, a: Any, b: Any) -> Any:
        return (a and b) if op == "and" else (a or b)

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        return a if cond else b

    def convert(self, value: Any, source: str, target: str) -> Any:
        """A dtype conversion (registry rule ``convert``); the result as a float (bools stay).  A
        rounding to a narrow float follows the proof (``identity_roundings``): the value goes on
        exact, and an integer conversion reading it sees it rounded."""
        from verifier.backends import NumpyBackend
        from verifier.rules.casts import float8_max, float_format, kind, round_value
        fmt = float_format(target)
        if kind(source) == "float" and kind(target) == "float" and fmt is None:
            return value  # widening (or to float32): the value, rounded or not, as it is
        if fmt is not None and kind(source) != "bool":
            exact = float(value)
            limit = float8_max(target)
            if limit is not None:  # float8 saturates: a change of value the proof keeps too
                exact = min(max(exact, -limit), limit)
            before = value.rounded if isinstance(value, Rounded) else exact
            if limit is not None:
                before = min(max(before, -limit), limit)
            return Rounded(exact, round_value(before, fmt))
        if isinstance(value, Rounded) and kind(target) != "float":
            value = value.rounded
        result = _convert_rule(NumpyBackend(), value, source, target)
        return bool(result) if target == "bool" else float(result)

    def call(self, fn: str, args: list[Any]) -> Any:
        if isinstance(args[0], Rounded):
            exact, shadow = self.call(fn, [float(args[0])]), self.call(fn, [args[0].rounded])
            return Rounded(exact, shadow) if isinstance(exact, float) else exact
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
        if any(self._is_inf(v) for v in values):
            raise InfinityArithmetic()

    # -inf enters a kernel as a constant (``T.fill(m, -T.infinity)``, a mask written with
    # ``T.if_then_else`` on index conditions), never from the symbolic inputs, which are finite
    # reals: so these rules decide every case concretely, and what they cannot decide
    # (``-inf + inf``, ``-inf`` times a symbolic value) stays unsupported.
    @staticmethod
    def _is_inf(value: Any) -> bool:
        return isinstance(value, (NegInf, PosInf))

    @staticmethod
    def _sign(value: Any) -> int | None:
        if isinstance(value, (int, float)):
            return (value > 0) - (value < 0)
        term = z3.simplify(value) if z3.is_expr(value) else None
        if term is not None and z3.is_rational_value(term):
            number = term.as_fraction()
            return (number > 0) - (number < 0)
        return None

    def add(self, a: Any, b: Any) -> Any:
        if self._is_inf(a) or self._is_inf(b):
            if self._is_inf(a) and self._is_inf(b) and type(a) is not type(b):
                raise InfinityArithmetic()
            return a if self._is_inf(a) else b
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        if self._is_inf(a) or self._is_inf(b):
            return self.add(a, self.neg(b))
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        if self._is_inf(a) or self._is_inf(b):
            inf, other = (a, b) if self._is_inf(a) else (b, a)
            sign = 1 if isinstance(other, PosInf) else -1 if isinstance(other, NegInf) else self._sign(other)
            if not sign:  # 0 * inf, or a symbolic factor whose sign is unknown
                raise InfinityArithmetic()
            return inf if sign > 0 else self.neg(inf)
        return a * b

    def div(self, a: Any, b: Any) -> Any:
        if self._is_inf(b):
            if self._is_inf(a):
                raise InfinityArithmetic()
            return z3.RealVal(0)
        if self._is_inf(a):
            sign = self._sign(b)
            if not sign:
                raise InfinityArithmetic()
            return a if sign > 0 else self.neg(a)
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
        if self._is_inf(a) or self._is_inf(b):  # an infinity against a finite value: known
            rank = {NegInf: -1, PosInf: 1}
            ra, rb = rank.get(type(a), 0), rank.get(type(b), 0)
            if ra == rb:
                raise InfinityArithmetic()
            return {"<": ra < rb, "<=": ra < rb, ">": ra > rb, ">=": ra > rb, "==": False, "!=": True}[op]
        return {"<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
                "==": lambda: a == b, "!=": lambda: a != b}[op]()

    def logic(self, op: str, a: Any, b: Any) -> Any:
        return z3.And(a, b) if op == "and" else z3.Or(a, b)

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        if isinstance(cond, bool):  # decided by indices: the other branch may be an infinity
            return a if cond else b
        decided = z3.simplify(cond) if z3.is_expr(cond) else None
        if decided is not None and (z3.is_true(decided) or z3.is_false(decided)):
            return a if z3.is_true(decided) else b
        self._finite(a, b)
        return z3.If(cond, a, b)

    def convert(self, value: Any, source: str, target: str) -> Any:
        """A dtype conversion (registry rule ``convert``) as a Real term (an integer dtype holds
        integer-valued reals); infinities stay infinities unless the target saturates them."""
        from verifier import backends as verifier_backends
        from verifier.rules.casts import float8_max, int_range, kind
        if self._is_inf(value):
            sign = 1 if isinstance(value, PosInf) else -1
            if kind(target) == "int":
                lo, hi = int_range(target)
                return z3.RealVal(hi if sign > 0 else lo)
            limit = float8_max(target)
            return value if limit is None else z3.RealVal(sign * limit)
        if kind(source) == "float" and kind(target) != "float" and z3.is_expr(value):
            value = keep_roundings(value)  # a rounding read by a conversion to an integer moves it by a whole unit
        backend = verifier_backends.Z3Backend()
        backend.fold_roundings = False  # a constant rounds like any value: the identity unless an integer reads it
        result = _convert_rule(backend, value, source, target)
        if isinstance(result, z3.BoolRef) or target == "bool":
            return result
        return z3.ToReal(result) if z3.is_int(result) else result

    def call(self, fn: str, args: list[Any]) -> Any:
        if fn in ("exp", "exp2") and len(args) == 1 and isinstance(args[0], NegInf):
            return z3.RealVal(0)
        self._finite(*args)
        if fn == "abs":
            return z3.If(args[0] >= 0, args[0], -args[0])
        if fn not in self._functions:  # the verifier's name for a unary function: a traced reference's exp is ours
            self._functions[fn] = z3.Function(f"{fn}_1_0", z3.RealSort(), z3.RealSort())
        return self._functions[fn](args[0])
