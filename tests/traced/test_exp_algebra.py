"""Online softmax against softmax: equal by the algebra of exponentials, and only then."""
from __future__ import annotations

import math

import pytest
import z3

from verifier.exp_algebra import mentions_exponentials, prove_equal

LOG2_E = 1.44269504
SCALE = 0.5  # 1 / sqrt(dim) for dim = 4


def _exp2():
    return z3.Function("exp2_1_0", z3.RealSort(), z3.RealSort())


def _softmax(n: int, j: int):
    return z3.Function(f"softmax_{n}_{j}", *([z3.RealSort()] * (n + 1)))


def _max(a, b):
    return z3.If(a >= b, a, b)


def _online(scores, values, rescale=True, coefficient=SCALE * LOG2_E):
    """The kernel's online softmax over two tiles of two keys: running max, exp2 rescaling."""
    exp2 = _exp2()
    acc, total, row_max = z3.RealVal(0), z3.RealVal(0), None
    for start in (0, 2):
        tile, tile_values = scores[start:start + 2], values[start:start + 2]
        new_max = _max(tile[0], tile[1]) if row_max is None else _max(row_max, _max(tile[0], tile[1]))
        factor = z3.RealVal(0) if row_max is None else exp2(row_max * coefficient - new_max * coefficient)
        weights = [exp2(s * coefficient - new_max * coefficient) for s in tile]
        total = total * factor + weights[0] + weights[1]
        acc = (acc * factor if rescale else acc) + weights[0] * tile_values[0] + weights[1] * tile_values[1]
        row_max = new_max
    return acc / total


@pytest.fixture
def data():
    q, k = z3.Reals("q0 q1"), [z3.Reals(f"k{j}0 k{j}1") for j in range(4)]
    scores = [q[0] * kj[0] + q[1] * kj[1] for kj in k]
    values = list(z3.Reals("v0 v1 v2 v3"))
    reference = sum(_softmax(4, j)(*[s * SCALE for s in scores]) * values[j] for j in range(4))
    return scores, values, reference


def test_online_softmax_equals_softmax_with_log2e_folded_into_the_scale(data):
    scores, values, reference = data
    assert mentions_exponentials([reference])
    assert prove_equal([(_online(scores, values), reference)])


@pytest.mark.parametrize("mutant", [
    lambda s, v: _online(s, v, rescale=False),  # the partial output is not rescaled
    lambda s, v: _online(s, v, coefficient=SCALE),  # exp2 without log2(e)
    lambda s, v: _online(s, v, coefficient=SCALE * LOG2_E * 1.01),  # a scale 1 % off
    lambda s, v: _online(s[::-1], v),  # scores paired with the wrong values
])
def test_a_wrong_online_softmax_is_not_proven(data, mutant):
    scores, values, reference = data
    assert not prove_equal([(mutant(scores, values), reference)])


def test_a_masked_score_contributes_nothing():
    s0, v0 = z3.Reals("s0 v0")
    masked = z3.Real("minus_infinity") + z3.Real("s1")  # the reference adds a -inf mask
    reference = _softmax(2, 0)(s0, masked) * v0
    assert prove_equal([(v0, reference)])
    assert not prove_equal([(v0 * 2, reference)])


@pytest.mark.parametrize("exponent", [
    z3.Real("minus_infinity") * z3.Real("s"),  # -inf times a value of unknown sign
    z3.Real("minus_infinity") - z3.Real("minus_infinity"),  # NaN
    z3.Real("plus_infinity"),
])
def test_what_an_infinity_does_outside_a_masked_score_is_not_read(exponent):
    exp = z3.Function("exp_1_0", z3.RealSort(), z3.RealSort())
    assert not prove_equal([(exp(exponent), z3.RealVal(0))])
    assert not prove_equal([(exp(exponent), exp(exponent) * 0)])


def test_identical_opaque_functions_are_equal_and_log2e_is_not_confused_with_e():
    x = z3.Real("x")
    tanh = z3.Function("tanh_1_0", z3.RealSort(), z3.RealSort())
    exp, exp2 = z3.Function("exp_1_0", z3.RealSort(), z3.RealSort()), _exp2()
    assert prove_equal([(tanh(x) * exp(x), exp2(x * LOG2_E) * tanh(x))])
    assert not prove_equal([(exp(x), exp2(x))])
    assert math.isclose(LOG2_E, math.log2(math.e), rel_tol=1e-8)


def _two_pass(scores, coefficient=SCALE * LOG2_E, log_name="log2_1_0", keep_max=True):
    """Pass 1: lse = m * c + log2(sum exp2(s * c - m * c)); pass 2: y = exp2(s * c - lse)."""
    exp2, log = _exp2(), z3.Function(log_name, z3.RealSort(), z3.RealSort())
    m = _max(_max(scores[0], scores[1]), _max(scores[2], scores[3]))
    total = sum(exp2(s * coefficient - m * coefficient) for s in scores)
    lse = (m * coefficient if keep_max else 0) + log(total)
    return [exp2(s * coefficient - lse) for s in scores]


def test_a_two_pass_softmax_through_log2_of_the_sum_is_softmax(data):
    scores, _, _ = data
    reference = [_softmax(4, j)(*[s * SCALE for s in scores]) for j in range(4)]
    assert prove_equal(list(zip(_two_pass(scores), reference)))


@pytest.mark.parametrize("mutant", [
    lambda s: _two_pass(s, log_name="log_1_0"),  # natural log where log2 is meant
    lambda s: _two_pass(s, keep_max=False),  # the maximum left out of the log-sum-exp
    lambda s: _two_pass(s)[::-1],  # outputs in the wrong order
])
def test_a_wrong_two_pass_softmax_is_not_proven(data, mutant):
    scores, _, _ = data
    reference = [_softmax(4, j)(*[s * SCALE for s in scores]) for j in range(4)]
    assert not prove_equal(list(zip(mutant(scores), reference)))


def test_a_log_sum_exp_loses_its_shift_and_a_negative_weight_keeps_it():
    import z3
    from verifier.backends import normal_form
    from verifier.exp_identity import exp_normal_form, factor_logarithms
    exp = z3.Function("exp_1_0", z3.RealSort(), z3.RealSort())
    log = z3.Function("log_1_0", z3.RealSort(), z3.RealSort())
    x, m = z3.Reals("x0 x1 x2"), z3.Real("m")
    unshifted = log(sum(exp(xi) for xi in x))
    half = log(sum(exp(xi - m / 2) for xi in x)) + m / 2
    assert z3.is_rational_value(exp_normal_form(factor_logarithms(normal_form(half - unshifted))))
    fewer = log(sum(exp(xi - m) for xi in x[:2])) + m
    assert not z3.is_rational_value(exp_normal_form(factor_logarithms(normal_form(fewer - unshifted))))
    # the inner sum may be negative, where log(e^L T) = L + log T does not hold: not factored
    signed = log(exp(x[0] - m) - exp(x[1] - m)) + m - log(exp(x[0]) - exp(x[1]))
    assert not z3.is_rational_value(exp_normal_form(factor_logarithms(normal_form(signed))))
