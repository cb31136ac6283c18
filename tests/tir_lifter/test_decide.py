"""tir_lifter/decide.py: "some output element differs" asked once per renaming class of elements."""
import z3

from tir_lifter.decide import decide, one_per_class


def _clamped_quotient(x, m):
    """What a per-row fp8 cast computes for one element: x / (m / 448) clamped to [-448, 448],
    with m the row's absolute maximum (at least 1e-4); the reference writes x * (448 / m)."""
    q = x / (m / 448)
    return z3.If(q > 448, 448, z3.If(q < -448, -448, q)), x * (448 / m)


def _row_claims(rows):
    claims, inputs = [], set()
    for r in range(rows):
        x, y = z3.Real(f"x[{r}, 0]"), z3.Real(f"x[{r}, 1]")
        inputs |= {x.get_id(), y.get_id()}
        absolute = [z3.If(v >= 0, v, -v) for v in (x, y)]
        m = z3.If(absolute[0] >= absolute[1], absolute[0], absolute[1])
        m = z3.If(m >= 1 / 10000, m, z3.RealVal(1) / 10000)
        for v in (x, y):
            got, want = _clamped_quotient(v, m)
            claims.append(got != want)
    return claims, inputs


def test_elements_that_rename_one_another_are_asked_once():
    claims, inputs = _row_claims(4)  # 8 elements: asked one class at a time straight away
    decision = decide(claims, [], inputs, 20000)
    assert decision.status == z3.unsat
    assert decision.classes == 2  # the row's first and second element; every row renames row 0
    assert decision.calls == 2


def test_a_disjunction_z3_cannot_decide_in_time_is_decided_class_by_class():
    """24 elements asked at once (the question as a whole) kept Z3 busy for its whole 20 s limit
    when tried; in 2 classes, one call each decides them in milliseconds."""
    claims, inputs = _row_claims(12)
    decision = decide(claims, [], inputs, 20000)
    assert decision.status == z3.unsat
    assert (decision.classes, decision.calls) == (2, 2)


def test_claims_too_large_to_sort_cheaply_are_asked_together_first(monkeypatch):
    """Past the walk limit the call for all comes first, as before; undecided (here within 2 s),
    the classes are asked after it."""
    import tir_lifter.decide as decide_module

    monkeypatch.setattr(decide_module, "CLASS_WALK_LIMIT", 10)
    claims, inputs = _row_claims(12)
    decision = decide(claims, [], inputs, 2000)
    assert decision.status == z3.unsat
    assert (decision.classes, decision.calls) == (2, 3)
    x, y = z3.Reals("x y")
    linear = [x + i != x + i for i in range(12)] + [x + y != y + x]
    assert decide(linear, [], {x.get_id(), y.get_id()}, 2000).calls == 1  # decided at once


def test_claims_alike_but_for_their_dtype_ranges_are_asked_apart():
    """An int8 element above 200 is impossible, a uint8 one is not: the same claim with other
    ranges is another question (asked first, the impossible one must not answer for both)."""
    signed, unsigned = z3.Ints("s u")
    ranges = [z3.And(signed >= -128, signed <= 127), z3.And(unsigned >= 0, unsigned <= 255)]
    claims = [z3.ToReal(signed) > 200, z3.ToReal(unsigned) > 200]
    decision = decide(claims, ranges, {signed.get_id(), unsigned.get_id()}, 20000)
    assert decision.status == z3.sat and decision.classes == 2
    assert decision.model.eval(unsigned).as_long() > 200


def test_a_witness_is_looked_for_among_small_inputs_first():
    x, y = z3.Reals("x y")
    decision = decide([x * y != y * x + 1, x > 2 * y], [], {x.get_id(), y.get_id()}, 20000)
    assert decision.status == z3.sat
    values = [decision.model.eval(v, model_completion=True) for v in (x, y)]
    assert all(abs(float(v.as_fraction())) <= 8 for v in values)


def test_one_pair_per_renaming_class_and_named_infinities_kept_apart():
    exp = z3.Function("exp_1_0", z3.RealSort(), z3.RealSort())
    x0, x1, s0, s1, z = z3.Reals("x0 x1 s0 s1 z")
    infinity = z3.Real("minus_infinity")
    pairs = [(exp(x0) / s0, exp(x0) * (1 / s0)), (exp(x1) / s1, exp(x1) * (1 / s1)),
             (exp(infinity + z), z), (exp(x0 + z), z)]
    kept = one_per_class(pairs, frozenset({"minus_infinity"}))
    assert len(kept) == 3  # the two quotients rename each other; -inf is no unknown to rename
    assert pairs[2] in kept and pairs[3] in kept
