"""The Z3 value algebra of the lifter: infinities are kernel constants, decided concretely."""
from __future__ import annotations

import pytest
import z3

from tir_lifter.backends import NEG_INF, POS_INF, InfinityArithmetic, Z3Backend


@pytest.fixture
def b():
    return Z3Backend()


def test_minus_infinity_absorbs_finite_sums_and_positive_scales(b):
    x = z3.Real("x")
    assert b.add(NEG_INF, x) is NEG_INF
    assert b.sub(b.mul(NEG_INF, z3.RealVal(0.25)), x) is NEG_INF
    assert b.sub(x, NEG_INF) is POS_INF


def test_a_negative_scale_flips_the_infinity(b):
    assert b.mul(NEG_INF, z3.RealVal(-2)) is POS_INF


def test_exp_of_minus_infinity_is_zero_the_masked_score_of_online_softmax(b):
    assert z3.is_rational_value(b.call("exp2", [NEG_INF])) and b.call("exp2", [NEG_INF]).as_fraction() == 0


def test_comparisons_with_an_infinity_are_known(b):
    assert b.compare("<", NEG_INF, z3.Real("x")) is True
    assert b.compare(">=", NEG_INF, z3.Real("x")) is False


@pytest.mark.parametrize("operation", [
    lambda b: b.add(NEG_INF, POS_INF),
    lambda b: b.mul(NEG_INF, z3.Real("x")),  # the sign of a symbolic factor is unknown
    lambda b: b.mul(NEG_INF, z3.RealVal(0)),
    lambda b: b.call("exp", [POS_INF]),
])
def test_what_cannot_be_decided_stays_unsupported(b, operation):
    with pytest.raises(InfinityArithmetic):
        operation(b)


def test_a_mask_decided_by_indices_picks_its_branch_even_when_it_is_an_infinity(b):
    assert b.select(b.compare("<", z3.IntVal(3), z3.IntVal(2)), NEG_INF, z3.Real("s")) is not NEG_INF
    assert b.select(b.compare("<", z3.IntVal(1), z3.IntVal(2)), NEG_INF, z3.Real("s")) is NEG_INF
    with pytest.raises(InfinityArithmetic):
        b.select(z3.Real("s") > 0, NEG_INF, z3.Real("s"))
