"""verifier/term_walk.py: walks over Z3 terms through the C API give what a walk over z3py's wrappers gives."""
import z3

from verifier.term_walk import free_constants, mentions, uninterpreted_declarations


def _names_by_wrappers(terms):
    seen, names, stack = set(), set(), list(terms)
    while stack:
        node = stack.pop()
        if not z3.is_app(node) or node.get_id() in seen:
            continue
        seen.add(node.get_id())
        names.add(node.decl().name())
        stack.extend(node.children())
    return names


def _terms():
    x, y, inf = z3.Reals("x y inf")
    exp = z3.Function("exp_1_0", z3.RealSort(), z3.RealSort())
    rounded = z3.Function("round_float16", z3.RealSort(), z3.RealSort())
    shared = exp(x - y) * rounded(x)
    return [shared + 1, z3.If(shared >= inf, shared, y)], exp, rounded


def test_mentions_sees_functions_constants_and_conditionals_anywhere_in_shared_terms():
    terms, _, _ = _terms()
    for name in _names_by_wrappers(terms):
        assert mentions(terms, lambda n, wanted=name: n == wanted), name
    assert not mentions(terms, lambda n: n == "log_1_0")
    assert mentions(terms[1:], lambda n: n == "if") and not mentions(terms[:1], lambda n: n == "if")
    assert mentions(terms, lambda n: n == "inf")          # a constant is an application too
    assert not mentions([1.5, None], lambda n: True)       # no term at all


def test_a_memo_kept_across_calls_gives_the_same_answers():
    terms, _, _ = _terms()
    memo: dict[int, bool] = {}
    assert not mentions(terms[:1], lambda n: n == "if", memo)
    assert mentions(terms, lambda n: n == "if", memo)       # the shared part is known, the If is found


def test_uninterpreted_declarations_are_the_functions_applied_and_seen_terms_are_skipped():
    terms, exp, rounded = _terms()
    found = uninterpreted_declarations(terms)
    assert sorted(str(d) for d in found) == sorted([str(exp), str(rounded)])
    seen: set[int] = set()
    uninterpreted_declarations(terms[:1], seen)
    assert uninterpreted_declarations(terms[:1], seen) == []  # all of it seen already


def test_free_constants_lists_the_unknowns_in_order_of_first_appearance_and_no_function():
    x, y, z = z3.Reals("x y z")
    i = z3.Int("i")
    exp = z3.Function("exp_1_0", z3.RealSort(), z3.RealSort())
    term = z3.If(x > y, x * z3.ToReal(i), exp(z) / x) + y
    assert [str(c) for c in free_constants(term)] == ["x", "y", "i", "z"]
    # a renaming of the term lists the renamed unknowns at the same positions
    a, b, c = z3.Reals("a b c")
    j = z3.Int("j")
    renamed = z3.If(a > b, a * z3.ToReal(j), exp(c) / a) + b
    assert [str(u) for u in free_constants(renamed)] == ["a", "b", "j", "c"]
