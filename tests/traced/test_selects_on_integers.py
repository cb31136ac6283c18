"""The traced check's test for values that select by integer data (lookups, masks by token id),
walked once per subterm per proof attempt: same answers as a plain walk, shared subterms reused."""
import numpy as np
import z3

from verifier import traced_check as tc


def _value(term):
    array = np.empty((1,), dtype=object)
    array[0] = term
    return array


def test_selects_on_integer_conditions_only():
    x, r, b = z3.Int("x"), z3.Real("r"), z3.Bool("b")
    cases = [(z3.If(x > 1, r * 2, r + 1) + r, True), (z3.If(r > 1, r * 2, r + 1) + r, False),
             (z3.If(z3.And(b, x == 2), r, r + 1) * r, True), (r * r + 1, False), (z3.If(b, r, 1 + r), False),
             (z3.If(r > 0, z3.If(x == 3, r, 0), r), True)]
    for term, want in cases:
        tc._SELECTS_MEMO.clear()
        assert tc._selects_on_integers(_value(term)) is want, term
        assert tc._selects_on_integers(_value(term)) is want, term  # from the memo


def test_shared_subterms_are_judged_once_and_reused():
    x, r = z3.Int("x"), z3.Real("r")
    tc._SELECTS_MEMO.clear()
    lookup = z3.If(x == 1, r, r * 3)
    assert tc._selects_on_integers(_value(lookup * 2))
    known = len(tc._SELECTS_MEMO)
    assert tc._selects_on_integers(_value(lookup * 2 + r))  # a later value built on the earlier one
    assert len(tc._SELECTS_MEMO) <= known + 3  # only the new nodes were walked
    assert not tc._selects_on_integers(_value(r * r))
    assert tc._selects_on_integers(np.empty((0,), dtype=object)) is False
