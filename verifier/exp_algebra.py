"""Prove kernel == reference where both are built from ``exp``/``exp2``/``softmax`` (online softmax,
flash attention): by algebra on exponentials, not by Z3's nonlinear search.

Online softmax rescales partial sums by ``exp2(m_old * c - m_new * c)`` and divides by the running
sum at the end; the reference is ``softmax(scores) @ V``.  They are equal because
``e^(a+b) = e^a e^b`` and ``softmax(x)_j = e^(x_j) / sum_k e^(x_k)`` (the running maximum
cancels), which an uninterpreted ``exp`` cannot know.  Here every exponential is written as a
product of powers of positive unknowns, one per monomial of its exponent (``exp2(c*q*k - c*m)``
becomes ``X_qk * X_m^-1``); both sides become quotients of Laurent polynomials in those unknowns
and the data, and ``a/b == c/d`` is decided exactly as ``a*d == c*b`` (rational coefficients).
An identity for *every* positive value of the unknowns holds in particular for the real
exponentials: equality is a proof; anything else decides nothing (the caller goes on with Z3
and concrete runs).

``exp_identity`` rewrites terms for the solver (``exp`` only, traced proofs); this module decides
the equality of whole terms itself and reads ``exp2``, a folded ``log2 e``, the verifier's
``softmax`` functions and its ``minus_infinity`` masks (the kernel lifter uses it).

Assumptions, stated with every proof that uses this: floating-point rounding is not modelled, and
two exponent coefficients of the same monomial that agree to 1e-5 relative (``scale * 1.44269504``
written for ``scale * log2(e)``) are taken as equal.  ``-inf`` in an exponent with finite rest
gives 0 (a masked score).  Other functions and undecided ``If`` terms stay opaque unknowns (a
function of identical terms is equal).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import z3

from .budget import clock
from .term_walk import mentions

ASSUMPTIONS = ("exponentials by algebra (e^(a+b) = e^a e^b, e^(k log y) = y^k for y > 0, softmax expanded); "
               "exponent constants equal to 1e-5 relative taken as equal (1.44269504 as log2 e)")
_TO_BASE_TWO = {"exp_1_0": math.log2(math.e), "exp2_1_0": 1.0}
_LOG_TO_BASE_TWO = {"log_1_0": math.log(2), "log2_1_0": 1.0}  # 2^(c * log y) = y^(c * this)
_SOFTMAX = re.compile(r"softmax_(\d+)_(\d+)$")
INFINITIES = {"minus_infinity": -1, "plus_infinity": 1}  # the verifier's names for a masked score
_RELATIVE = 1e-5
_MAX_POWER = 8

Monomial = tuple  # sorted ((generator, exponent), ...), exponents non-zero (negative only for unknowns)
Poly = dict  # Monomial -> coefficient (Fraction, or float inside exponents)
_ONE: Monomial = ()


class NotAlgebraic(Exception):
    """A term this algebra does not read (an infinity outside an exponent, an unknown form)."""


def mentions_exponentials(terms: list[Any]) -> bool:
    return mentions(terms, lambda name: name in _TO_BASE_TWO or bool(_SOFTMAX.match(name)))


def _is_infinity(name: str) -> bool:
    return name in INFINITIES


def _constant(term: Any) -> float | None:
    if z3.is_rational_value(term) or z3.is_int_value(term):
        return float(term.as_fraction()) if z3.is_rational_value(term) else float(term.as_long())
    if z3.is_app(term) and term.decl().name() == "sqrt_1_0" and z3.is_rational_value(term.arg(0)):
        value = float(term.arg(0).as_fraction())
        return math.sqrt(value) if value >= 0 else None
    return None


def prove_equal(pairs: list[tuple[Any, Any]], seconds: float = 60.0) -> bool:
    """True when every ``(got, want)`` pair is equal as a rational function of the data and of
    positive unknowns standing for the exponentials; False when not shown within ``seconds``
    (never a disproof); ``seconds`` of this process's CPU time, not the wall clock's."""
    deadline = clock() + seconds
    algebra = _Algebra()
    try:
        for got, want in pairs:  # first pass: every exponent's monomials, so the units are known
            algebra.collect_exponents(got)
            algebra.collect_exponents(want)
        for got, want in pairs:
            if clock() > deadline:
                return False
            (a, b), (c, d) = algebra.value(got), algebra.value(want)
            left, right = _mul(a, d), _mul(c, b)
            if left != right:
                return False
    except (NotAlgebraic, RecursionError, ZeroDivisionError, OverflowError):
        return False
    return True


class _Algebra:
    def __init__(self) -> None:
        self._generators: dict[Any, int] = {}  # data name / opaque term / (monomial, unit) -> number
        self._exponents: dict[tuple[int, float], tuple[dict[Monomial, float], int]] = {}
        self._coefficients: dict[Monomial, set[float]] = {}
        self._infinite: dict[int, bool] = {}
        self.logarithms: dict[int, tuple[Any, str]] = {}  # generator -> (argument, log function)
        self._collected: set[int] = set()
        self.memos: dict[bool, dict[int, tuple[Poly, Poly]]] = {True: {}, False: {}}

    # --- exponents --------------------------------------------------------------------------
    def collect_exponents(self, term: Any) -> None:
        seen = self._collected
        stack = [term]
        while stack:
            node = stack.pop()
            if node.get_id() in seen or not z3.is_app(node):
                continue
            seen.add(node.get_id())
            name = node.decl().name()
            if name in _TO_BASE_TWO:
                self._exponent(node.arg(0), _TO_BASE_TWO[name])
            elif _SOFTMAX.match(name):
                for child in node.children():
                    self._exponent(child, _TO_BASE_TWO["exp_1_0"])
            stack.extend(node.children())  # exponentials inside a logarithm inside an exponent

    def _exponent(self, term: Any, to_base_two: float) -> tuple[dict[Monomial, float], int, dict[int, float]]:
        """The exponent as {monomial: base-2 coefficient} (constant under ``()``), the sign of
        the infinity it is (-1: the exponential is 0), and {logarithm: base-2 coefficient}."""
        key = (term.get_id(), to_base_two)
        if key not in self._exponents:
            sign = self.infinity_sign(term)
            if sign > 0:
                raise NotAlgebraic("exp of +inf")
            linear: dict[Monomial, float] = {}
            logs: dict[int, float] = {}
            if not sign:
                numerator, denominator = _Reader(self, exact=False).value(term)
                if set(denominator) != {_ONE}:
                    raise NotAlgebraic("an exponent divided by a variable")
                scale = to_base_two / denominator[_ONE]
                for monomial, coefficient in numerator.items():
                    if any(g in self.logarithms for g, _ in monomial):
                        if len(monomial) != 1 or monomial[0][1] != 1:
                            raise NotAlgebraic("a logarithm times a value in an exponent")
                        logs[monomial[0][0]] = coefficient * scale
                        continue
                    linear[monomial] = coefficient * scale
                    self._coefficients.setdefault(monomial, set()).add(abs(coefficient * scale))
            self._exponents[key] = (linear, sign, logs)
        return self._exponents[key]

    def exponential(self, term: Any, to_base_two: float) -> tuple[Poly, Poly]:
        """``base^term``: a Laurent monomial in the positive unknowns (0 for a masked score),
        times ``y^k`` for each ``k log(y)`` in the exponent (k a small integer)."""
        linear, sign, logs = self._exponent(term, to_base_two)
        one = {_ONE: Fraction(1)}
        if sign < 0:
            return {}, one
        powers: dict[int, int] = {}
        for monomial, coefficient in linear.items():
            unit, power = self._unit_of(monomial, coefficient)
            generator = self.generator(("unknown", monomial, unit))
            powers[generator] = powers.get(generator, 0) + power
        numerator, denominator = {tuple(sorted((g, p) for g, p in powers.items() if p)): Fraction(1)}, one
        for generator, coefficient in logs.items():
            argument, name = self.logarithms[generator]
            power = _multiple(abs(coefficient * _LOG_TO_BASE_TWO[name]), 1.0)
            if not power:
                raise NotAlgebraic("a logarithm whose power is not a small integer")
            a, b = self.value(argument)
            if coefficient < 0:
                a, b = b, a
            for _ in range(power):
                numerator, denominator = _mul(numerator, a), _mul(denominator, b)
        return numerator, denominator

    def _unit_of(self, monomial: Monomial, coefficient: float) -> tuple[int, int]:
        units: list[float] = []
        for value in sorted(self._coefficients.get(monomial, ())):
            if not any(_multiple(value, u) for u in units):
                units.append(value)
        for index, unit in enumerate(units):
            power = _multiple(abs(coefficient), unit)
            if power:
                return index, power if coefficient > 0 else -power
        raise NotAlgebraic("an exponent coefficient without a unit")

    # --- infinities (the reference's masked scores) ----------------------------------------------
    def infinity_sign(self, term: Any) -> int:
        """0 for a term without an infinity; else the sign of the infinity the term is (-inf plus
        finite values, times non-zero constants, chosen by a decided ``If``); other uses of an
        infinity are not read."""
        if not mentions([term], _is_infinity, self._infinite):
            return 0
        if z3.is_const(term):
            return INFINITIES[term.decl().name()]
        kind, children = term.decl().kind(), term.children()
        if kind in (z3.Z3_OP_UMINUS, z3.Z3_OP_TO_REAL):
            return (-1 if kind == z3.Z3_OP_UMINUS else 1) * self.infinity_sign(children[0])
        if kind == z3.Z3_OP_ITE:
            decided = self.decide(children[0])
            if decided is None:
                raise NotAlgebraic("an undecided choice between infinities")
            return self.infinity_sign(children[1] if decided else children[2])
        signs = [self.infinity_sign(c) for c in children]
        if not any(signs):  # infinities only in conditions already decided
            return 0
        if kind in (z3.Z3_OP_ADD, z3.Z3_OP_SUB):
            signed = {(-s if kind == z3.Z3_OP_SUB and i else s) for i, s in enumerate(signs) if s}
            if len(signed) != 1:
                raise NotAlgebraic("-inf + inf")
            return signed.pop()
        if kind in (z3.Z3_OP_MUL, z3.Z3_OP_DIV) and sum(map(bool, signs)) == 1 and \
                (kind == z3.Z3_OP_MUL or signs[0]):
            sign = next(s for s in signs if s)
            for child, child_sign in zip(children, signs):
                value = None if child_sign else _constant(child)
                if not child_sign and not value:
                    raise NotAlgebraic("an infinity times a value")
                sign *= 1 if child_sign or value > 0 else -1
            return sign
        raise NotAlgebraic("an infinity in a form other than a masked score")

    def decide(self, condition: Any) -> bool | None:
        """A condition's value when it is constant, or compares an infinity with a finite value."""
        simple = z3.simplify(condition)
        if z3.is_true(simple) or z3.is_false(simple):
            return z3.is_true(simple)
        kind = condition.decl().kind() if z3.is_app(condition) else None
        if kind not in _ORDER or not mentions([condition], _is_infinity, self._infinite):
            return None
        left, right = (self.infinity_sign(c) for c in condition.children())
        if left == right:
            return None
        return _ORDER[kind](left, right)

    # --- values -----------------------------------------------------------------------------
    def value(self, term: Any) -> tuple[Poly, Poly]:
        return _Reader(self, exact=True).value(term)

    def generator(self, key: Any) -> int:
        return self._generators.setdefault(key, len(self._generators))


class _Reader:
    """z3 term -> (numerator, denominator) Laurent polynomials; exact (Fraction) for values,
    float for exponents (where ``sqrt`` of a constant is a number)."""

    def __init__(self, algebra: _Algebra, exact: bool) -> None:
        self.algebra, self.exact = algebra, exact
        self.memo = algebra.memos[exact]

    def value(self, term: Any) -> tuple[Poly, Poly]:
        key = term.get_id()
        if key not in self.memo:
            self.memo[key] = self._read(term)
        return self.memo[key]

    def _number(self, value: Fraction) -> tuple[Poly, Poly]:
        number = value if self.exact else float(value)
        return ({_ONE: number} if number else {}), {_ONE: Fraction(1) if self.exact else 1.0}

    def _read(self, term: Any) -> tuple[Poly, Poly]:
        if z3.is_rational_value(term) or z3.is_int_value(term):
            return self._number(Fraction(term.as_fraction()) if z3.is_rational_value(term) else Fraction(term.as_long()))
        if not z3.is_app(term):
            raise NotAlgebraic("a bound variable")
        kind, children = term.decl().kind(), term.children()
        if z3.is_const(term) and kind == z3.Z3_OP_UNINTERPRETED:
            if term.decl().name() in INFINITIES:
                raise NotAlgebraic("an infinity outside a masked score")
            return self._generator(("name", term.decl().name()))
        values = [self.value(c) for c in children] if kind in _ARITHMETIC else []
        if kind == z3.Z3_OP_ADD:
            out = values[0]
            for v in values[1:]:
                out = _add(out, v)
            return out
        if kind == z3.Z3_OP_MUL:
            out = values[0]
            for v in values[1:]:
                out = (_mul(out[0], v[0]), _mul(out[1], v[1]))
            return out
        if kind == z3.Z3_OP_SUB:
            out = values[0]
            for v in values[1:]:
                out = _add(out, (_scale(v[0], -1), v[1]))
            return out
        if kind == z3.Z3_OP_UMINUS:
            return _scale(values[0][0], -1), values[0][1]
        if kind == z3.Z3_OP_DIV:
            (a, b), (c, d) = values
            if not c:
                raise NotAlgebraic("a division by zero")
            return _mul(a, d), _mul(b, c)
        if kind == z3.Z3_OP_TO_REAL:
            return values[0]
        if kind == z3.Z3_OP_ITE:
            decided = self.algebra.decide(children[0])
            if decided is not None:
                return self.value(children[1] if decided else children[2])
            return self._generator(("opaque", term.get_id()))
        if kind == z3.Z3_OP_UNINTERPRETED:
            return self._function(term, children)
        raise NotAlgebraic(f"term {term.decl().name()}")

    def _function(self, term: Any, children: list[Any]) -> tuple[Poly, Poly]:
        name = term.decl().name()
        if name in _TO_BASE_TWO or _SOFTMAX.match(name):
            if not self.exact:
                raise NotAlgebraic("an exponential inside an exponent")
            if name in _TO_BASE_TWO:
                return self.algebra.exponential(children[0], _TO_BASE_TWO[name])
            powers = [self.algebra.exponential(c, _TO_BASE_TWO["exp_1_0"]) for c in children]
            total = powers[0]
            for power in powers[1:]:
                total = _add(total, power)
            (a, b), (c, d) = powers[int(_SOFTMAX.match(name).group(2))], total
            return _mul(a, d), _mul(b, c)
        if name in _LOG_TO_BASE_TWO and not self.exact:  # inside an exponent: e^(k log y) = y^k
            generator = self.algebra.generator(("log", name, children[0].get_id()))
            self.algebra.logarithms[generator] = (children[0], name)
            return {((generator, 1),): 1.0}, {_ONE: 1.0}
        if name == "sqrt_1_0" and not self.exact and _constant(term) is not None:
            return self._number(Fraction(_constant(term)))
        return self._generator(("opaque", term.get_id()))

    def _generator(self, key: Any) -> tuple[Poly, Poly]:
        one = Fraction(1) if self.exact else 1.0
        return {((self.algebra.generator(key), 1),): one}, {_ONE: one}


_ORDER = {z3.Z3_OP_GE: lambda a, b: a >= b, z3.Z3_OP_GT: lambda a, b: a > b, z3.Z3_OP_LE: lambda a, b: a <= b,
          z3.Z3_OP_LT: lambda a, b: a < b}  # on infinity signs, one side finite (0)
_ARITHMETIC = {z3.Z3_OP_ADD, z3.Z3_OP_MUL, z3.Z3_OP_SUB, z3.Z3_OP_UMINUS, z3.Z3_OP_DIV, z3.Z3_OP_TO_REAL}


def _multiple(value: float, unit: float) -> int:
    """k when ``value`` is k times ``unit`` (1 <= k <= _MAX_POWER) to 1e-5 relative, else 0."""
    ratio = value / unit
    k = round(ratio)
    return k if 1 <= k <= _MAX_POWER and abs(ratio - k) <= _RELATIVE * k else 0


def _accumulate(out: Poly, monomial: Monomial, coefficient: Any) -> None:
    total = out.get(monomial, 0) + coefficient
    if total:
        out[monomial] = total
    else:
        out.pop(monomial, None)


def _plus(p: Poly, q: Poly) -> Poly:
    out = dict(p)
    for monomial, coefficient in q.items():
        _accumulate(out, monomial, coefficient)
    return out


def _scale(p: Poly, factor: Any) -> Poly:
    return {m: c * factor for m, c in p.items()} if factor else {}


def _mul(p: Poly, q: Poly) -> Poly:
    if len(q) == 1 and _ONE in q:
        return _scale(p, q[_ONE]) if q[_ONE] != 1 else p
    if len(p) == 1 and _ONE in p:
        return _scale(q, p[_ONE]) if p[_ONE] != 1 else q
    out: Poly = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            _accumulate(out, _times(m1, m2), c1 * c2)
    return out


def _times(m1: Monomial, m2: Monomial) -> Monomial:
    if not m1:
        return m2
    if not m2:
        return m1
    powers = dict(m1)
    for generator, exponent in m2:
        powers[generator] = powers.get(generator, 0) + exponent
    return tuple(sorted((g, e) for g, e in powers.items() if e))


def _add(x: tuple[Poly, Poly], y: tuple[Poly, Poly]) -> tuple[Poly, Poly]:
    (a, b), (c, d) = x, y
    if b == d:
        return _plus(a, c), b
    return _plus(_mul(a, d), _mul(c, b)), _mul(b, d)
