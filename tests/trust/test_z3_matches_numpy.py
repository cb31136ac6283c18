"""Pattern 6: the Z3 encoding of every element-wise op computes what the NumPy evaluator computes.

Each op is evaluated on the same concrete operands twice: by the NumPy backend (the
evaluator that confirms counterexamples) and by the Z3 backend on numerals, simplified to a
number.  Values and integer-ness must agree: float -> int truncates toward zero (Z3's
``ToInt`` floors), ``/`` is true division even on integers (Z3's ``/`` on Ints is not),
``//`` floors and ``%`` takes the divisor's sign, as in Python and torch.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import z3

from verifier.backends import NumpyBackend, Z3Backend, as_term
from verifier.ir import Mesh
from verifier.registry import RankContext, get_rule

CTX = RankContext(Mesh((("tp", 1),)), {"tp": 0})
# Dyadic floats are exact in float64, so NumPy and exact arithmetic agree on + - * // %.
INTS = [-7, -4, -3, -1, 0, 1, 2, 3, 5]
FLOATS = [-3.5, -2.75, -1.0, -0.25, 0.0, 0.5, 1.25, 2.0, 3.75]
DIVISORS_INT = [-3, -2, -1, 1, 2, 4]
DIVISORS_FLOAT = [-1.5, -0.75, 0.5, 1.25, 2.0]

BINARY = ["add", "sub", "mul", "div", "floordiv", "mod", "lt", "le", "gt", "ge", "eq", "ne"]
DIVIDING = {"div", "floordiv", "mod"}


def _number(term) -> tuple[object, str]:
    """A simplified Z3 numeral as (Python value, 'int'|'real'|'bool')."""
    term = z3.simplify(as_term(term))
    if z3.is_true(term) or z3.is_false(term):
        return z3.is_true(term), "bool"
    if z3.is_int_value(term):
        return term.as_long(), "int"
    assert z3.is_rational_value(term), f"not a numeral after simplification: {term}"
    return Fraction(term.numerator_as_long(), term.denominator_as_long()), "real"


def _numpy_kind(array: np.ndarray) -> str:
    return {"b": "bool", "i": "int", "u": "int"}.get(array.dtype.kind, "real")


def _both(kind: str, numpy_args: list[np.ndarray], attrs: dict):
    rule = get_rule(kind)
    concrete = np.asarray(rule.evaluate(NumpyBackend(), numpy_args, attrs, CTX)[0])
    symbolic_args = [np.asarray(np.frompyfunc(lambda v: as_term(v.item() if hasattr(v, "item") else v), 1, 1)(a),
                                dtype=object) for a in numpy_args]
    symbolic = np.asarray(rule.evaluate(Z3Backend(), symbolic_args, attrs, CTX)[0], dtype=object)
    return concrete, symbolic


def _assert_same(kind: str, concrete: np.ndarray, symbolic: np.ndarray, operands: str) -> None:
    assert concrete.shape == symbolic.shape
    for want, term in zip(concrete.reshape(-1), symbolic.reshape(-1)):
        got, got_kind = _number(term)
        assert got_kind == _numpy_kind(concrete), f"{kind}{operands}: Z3 gives a {got_kind}, NumPy a {concrete.dtype}"
        if got_kind == "real":
            assert float(got) == pytest.approx(float(want), rel=1e-12, abs=1e-12), f"{kind}{operands}"
        else:
            assert got == want.item(), f"{kind}{operands}: Z3 {got}, NumPy {want}"


def _operand_pairs(kind: str):
    for left_values, right_values in ((INTS, INTS), (FLOATS, FLOATS), (INTS, FLOATS), (FLOATS, INTS)):
        if kind in DIVIDING:
            right_values = DIVISORS_INT if right_values is INTS else DIVISORS_FLOAT
        left = np.array(left_values, dtype=np.int64 if left_values is INTS else np.float64)
        right = np.array(right_values, dtype=np.int64 if right_values in (INTS, DIVISORS_INT) else np.float64)
        grid_left, grid_right = (np.array(v) for v in zip(*itertools.product(left, right)))
        yield grid_left.astype(left.dtype), grid_right.astype(right.dtype)


@pytest.mark.parametrize("kind", BINARY)
def test_binary_op_encoding_equals_numpy(kind):
    for left, right in _operand_pairs(kind):
        concrete, symbolic = _both(kind, [left, right], {})
        _assert_same(kind, concrete, symbolic, f"({left.dtype}, {right.dtype})")


@pytest.mark.parametrize("kind", ["sub", "div", "floordiv", "mod"])
@pytest.mark.parametrize("scalar", [3, -2, 1.5, -0.75])
def test_scalar_operand_both_orders_equals_numpy(kind, scalar):
    for values in (np.array(INTS, dtype=np.int64), np.array(FLOATS)):
        for reverse in (False, True):
            if reverse and kind in DIVIDING and np.any(values == 0):
                values = values[values != 0]
            attrs = {"scalar": scalar, "reverse": reverse}
            concrete, symbolic = _both(kind, [values], attrs)
            _assert_same(kind, concrete, symbolic, f"(scalar={scalar}, reverse={reverse}, {values.dtype})")


@pytest.mark.parametrize("dtype", ["i64", "f32", "bool"])
def test_cast_encoding_equals_numpy(dtype):
    for values in (np.array(FLOATS + [-0.75, -1.5, 2.5, -2.5]), np.array(INTS, dtype=np.int64),
                   np.array([True, False])):
        concrete, symbolic = _both("cast", [values], {"dtype": dtype})
        _assert_same("cast", concrete, symbolic, f"({values.dtype} -> {dtype})")


def test_float_to_int_truncates_toward_zero_not_floor():
    _, symbolic = _both("cast", [np.array([-2.5, -0.5, 0.5, 2.5])], {"dtype": "i64"})
    assert [_number(t)[0] for t in symbolic] == [-2, 0, 0, 2]


def test_integer_true_division_is_not_integer_division():
    _, symbolic = _both("div", [np.array([7, -7], dtype=np.int64), np.array([2, 2], dtype=np.int64)], {})
    assert [_number(t) for t in symbolic] == [(Fraction(7, 2), "real"), (Fraction(-7, 2), "real")]


def test_remainder_takes_the_sign_of_the_divisor():
    _, symbolic = _both("mod", [np.array([-7, 7], dtype=np.int64), np.array([3, -3], dtype=np.int64)], {})
    assert [_number(t)[0] for t in symbolic] == [2, -2]


@pytest.mark.parametrize("kind", ["neg", "abs", "relu", "identity", "logical_not"])
def test_unary_op_encoding_equals_numpy(kind):
    samples = [np.array([True, False, True])] if kind == "logical_not" else \
        [np.array(INTS, dtype=np.int64), np.array(FLOATS)]
    for values in samples:
        concrete, symbolic = _both(kind, [values], {})
        _assert_same(kind, concrete, symbolic, f"({values.dtype})")


def test_where_and_masked_fill_encoding_equals_numpy():
    mask = np.array([True, False, True, False])
    for values in (np.array([1, -2, 3, -4], dtype=np.int64), np.array([0.5, -1.25, 2.0, -3.5])):
        concrete, symbolic = _both("where", [mask, values, -values], {})
        _assert_same("where", concrete, symbolic, f"({values.dtype})")
        concrete, symbolic = _both("masked_fill", [values, mask], {"value": 0.0})
        _assert_same("masked_fill", concrete, symbolic, f"({values.dtype})")


def test_square_root_of_a_number_is_that_number_and_of_a_term_stays_a_function():
    """``scores / torch.sqrt(torch.tensor(dim))``: the scale is a number, as a kernel's own
    Python-computed scale is, so the algebra of exponentials can compare the two."""
    backend = Z3Backend()
    folded = backend.unary("sqrt", np.array([z3.RealVal(16), z3.RealVal(2)], dtype=object))
    assert z3.simplify(as_term(folded[0]) == 4).eq(z3.BoolVal(True))
    assert abs(float(as_term(folded[1]).as_fraction()) - 2 ** 0.5) < 1e-15
    inverse = backend.unary("rsqrt", np.array([z3.RealVal(4)], dtype=object))
    assert z3.simplify(as_term(inverse[0]) == z3.RealVal(0.5)).eq(z3.BoolVal(True))
    x = z3.Real("x")
    kept = as_term(backend.unary("sqrt", np.array([x], dtype=object))[0])
    assert z3.is_app(kept) and kept.decl().name().startswith("sqrt") and kept.num_args() == 1
    negative = as_term(backend.unary("sqrt", np.array([z3.RealVal(-4)], dtype=object))[0])
    assert negative.decl().name().startswith("sqrt")  # not a real number: stays uninterpreted
