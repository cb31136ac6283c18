"""merge_conditionals: products pushed into their one conditional, conditionals of a sum merged
by condition.  Equal terms reach 0; the rewrite never changes a term's value (checked on random
points with Z3's own evaluation)."""
from __future__ import annotations

import random
from fractions import Fraction

import z3

from verifier.backends import normal_form
from verifier.conditional_sums import merge_conditionals

c, d = z3.Bools("c d")
x, y, i = z3.Reals("x y i")


def test_a_gradient_averaged_in_two_steps_cancels():
    rank = z3.RealVal(1) / 2 * i * z3.If(c, 0, x * y / 8 + x)
    single = i * z3.If(c, 0, x * y / 16 + x / 2)
    assert not z3.is_rational_value(normal_form(rank - single))  # what normal forms alone leave
    assert merge_conditionals(normal_form(rank - single)).eq(z3.RealVal(0))


def test_an_expert_output_summed_over_two_ranks_cancels_against_one_device():
    # an experts loop's index_add_ of row-parallel partial sums, all-reduced: each rank holds
    # If(token hit, its half of the dot product times the routing weight, 0); one device the whole
    # 32-term product, which Z3's sum-of-monomials form leaves unexpanded at its default blowup
    a, w = z3.RealVector("a", 32), z3.RealVector("w", 32)
    g = z3.Real("g")
    half = [z3.If(c, z3.Sum([a[k] * w[k] for k in part]) * g, 0) for part in (range(16), range(16, 32))]
    single = z3.If(c, z3.Sum([a[k] * w[k] for k in range(32)]) * g, 0)
    assert merge_conditionals(normal_form(half[0] + half[1] - single)).eq(z3.RealVal(0))
    assert not z3.is_rational_value(merge_conditionals(normal_form(half[0] - single)))


def test_conditionals_on_different_conditions_stay_apart():
    difference = normal_form(z3.If(c, x, 0) - z3.If(d, x, 0))
    assert not z3.is_rational_value(merge_conditionals(difference))


def test_a_real_difference_is_kept():
    difference = normal_form(z3.RealVal(1) / 2 * z3.If(c, 0, x) - z3.If(c, 0, x / 3))
    merged = merge_conditionals(difference)
    assert not z3.is_rational_value(merged)
    s = z3.Solver()
    s.add(merged != 0)
    assert s.check() == z3.sat


def _random_term(rng: random.Random, depth: int) -> z3.ArithRef:
    if depth == 0:
        return rng.choice([x, y, i, z3.RealVal(Fraction(rng.randint(-4, 4), rng.randint(1, 3)))])
    kind = rng.choice(["add", "mul", "ite", "scale"])
    if kind == "add":
        return _random_term(rng, depth - 1) + _random_term(rng, depth - 1)
    if kind == "mul":
        return _random_term(rng, depth - 1) * _random_term(rng, depth - 1)
    if kind == "scale":
        return z3.RealVal(Fraction(rng.randint(-3, 3), rng.randint(1, 4))) * _random_term(rng, depth - 1)
    return z3.If(rng.choice([c, d, x > y]), _random_term(rng, depth - 1), _random_term(rng, depth - 1))


def test_the_rewrite_keeps_every_value_on_random_terms_and_points():
    rng = random.Random(0)
    for _ in range(200):
        term = normal_form(_random_term(rng, 4))
        merged = merge_conditionals(term)
        for _ in range(3):
            point = [(x, z3.RealVal(rng.randint(-5, 5))), (y, z3.RealVal(rng.randint(-5, 5))),
                     (i, z3.RealVal(rng.randint(-5, 5))), (c, z3.BoolVal(rng.random() < 0.5)),
                     (d, z3.BoolVal(rng.random() < 0.5))]
            before = z3.simplify(z3.substitute(term, *point))
            after = z3.simplify(z3.substitute(merged, *point))
            assert before.eq(after), (term, merged, point)
