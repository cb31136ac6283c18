"""The one identity of ``exp`` the equivalence proof needs: ``exp(a) * exp(b) = exp(a + b)``.

``exp`` is an uninterpreted function in the Z3 encoding (``backends.Z3Backend.unary``), which
cannot see that online-softmax rescaling (ring attention, flash decoding, a vocab-parallel
softmax with a local max) computes the same numbers as one softmax: the partial sums
``sum exp(s - m1) * exp(m1 - m2)`` only equal ``sum exp(s - m2)`` by that identity.  This module
rewrites a term in sum-of-monomials form so that every monomial holds at most one ``exp``
(``exp(a) * exp(b) -> exp(a + b)``, ``x / exp(b) -> x * exp(-b)``), then normalises again.  The
identity holds for the real ``exp``, so a difference rewritten to zero is a proof; the rewrite
adds nothing the NumPy re-check could disagree with.

``factor_logarithms`` adds the matching identity of ``log``: ``log(e^L * T) = L + log T`` for a
positive ``T``, which takes the shift out of a log-sum-exp (a max shift divided by the world size
is as good as the max in real arithmetic).
"""
from __future__ import annotations

import z3

from .backends import is_zero, normal_form, rebuilt
from .term_walk import mentions

EXP_NAME = "exp_1_0"  # Z3Backend's symbol for the unary exp (name, arity 1, output 0)


def _is_exp(term: z3.ExprRef) -> bool:
    return z3.is_app(term) and term.num_args() == 1 and term.decl().name() == EXP_NAME


def mentions_exp(term: z3.ExprRef, memo: dict[int, bool] | None = None) -> bool:
    """Whether an ``exp`` application occurs in ``term``."""
    return mentions([term], lambda name: name == EXP_NAME, memo)


def merge_exponentials(term: z3.ExprRef) -> z3.ExprRef:
    """``term`` with products of exps merged (one pass, bottom-up, shared subterms once)."""
    done: dict[int, z3.ExprRef] = {}

    def walk(node: z3.ExprRef) -> z3.ExprRef:
        key = node.get_id()
        if key in done:
            return done[key]
        if not z3.is_app(node) or node.num_args() == 0 or _is_exp(node):
            done[key] = node
            return node
        children = [walk(child) for child in node.children()]
        if z3.is_mul(node):
            exps = [child for child in children if _is_exp(child)]
            if len(exps) >= 2:
                rest = [child for child in children if not _is_exp(child)]
                merged = exps[0].decl()(normal_form(z3.Sum([e.arg(0) for e in exps])))
                children = rest + [merged]
            result = children[0] if len(children) == 1 else z3.Product(children)
        elif z3.is_div(node) and _is_exp(children[1]):
            result = children[0] * children[1].decl()(normal_form(-children[1].arg(0)))
        elif z3.is_div(node):  # the sums of a quotient in canonical order, so equal quotients cancel
            result = normal_form(children[0]) / normal_form(children[1])
        elif z3.is_add(node):
            result = z3.Sum(children)
        elif all(a.eq(b) for a, b in zip(children, node.children())):
            result = node
        else:
            result = node.decl()(*children)
        done[key] = result
        return result

    return walk(term)


def exp_normal_form(term: z3.ExprRef, rounds: int = 3) -> z3.ExprRef:
    """Normal form modulo ``exp(a) exp(b) = exp(a + b)``: normalise, merge, until it settles."""
    current = normal_form(term)
    for _ in range(rounds):
        if not mentions_exp(current):
            return current
        merged = normal_form(merge_exponentials(current))
        if merged.eq(current):
            return current
        current = merged
    return current


def quotients_cancel(difference: z3.ExprRef) -> bool:
    """``a/b - c/d`` with ``a = c`` and ``b = d`` (by exp normal form): the same quotient twice.

    Congruence of division, so it holds whatever the denominators (Z3's division by zero is one
    unknown function of its arguments too)."""
    if not (z3.is_add(difference) and difference.num_args() == 2):
        return False
    first, second = difference.children()
    for left, right in ((first, second), (second, first)):
        if z3.is_div(left) and z3.is_mul(right) and right.num_args() == 2:
            scale, quotient = right.children()
            if z3.is_rational_value(scale) and scale.as_fraction() == -1 and z3.is_div(quotient):
                return all(is_zero(exp_normal_form(x - y)) for x, y in zip(left.children(), quotient.children()))
    return False


LOG_NAME = "log_1_0"  # Z3Backend's symbol for the unary natural log


def mentions_log(term: z3.ExprRef, memo: dict[int, bool] | None = None) -> bool:
    return mentions([term], lambda name: name == LOG_NAME, memo)


def factor_logarithms(term: z3.ExprRef) -> z3.ExprRef:
    """``log(sum_i k_i exp(a_i))`` with the part ``L`` common to every exponent taken out:
    ``L + log(sum_i k_i exp(a_i - L))`` — a log-sum-exp shifted by any amount then gets the same
    inner sum as the unshifted one.  Only when every ``k_i`` is a positive rational (the inner
    sum is then positive, so ``log(e^L * T) = L + log T`` holds); anything else is kept."""
    def factored(node: z3.ExprRef, children: list) -> z3.ExprRef | None:
        if node.num_args() == 1 and node.decl().name() == LOG_NAME:
            same = children[0].eq(node.arg(0))
            return _factored(node if same else node.decl()(*children))
        return None

    return rebuilt(term, factored)


def _factored(log_term: z3.ExprRef) -> z3.ExprRef:
    argument = exp_normal_form(log_term.arg(0))
    parts = [_weighted_exp(summand) for summand in (argument.children() if z3.is_add(argument) else [argument])]
    if not parts or any(part is None for part in parts):
        return log_term
    exponents = [_monomials(normal_form(application.arg(0))) for _, application in parts]
    common = [(coefficient, monomial) for key, (coefficient, monomial) in exponents[0].items()
              if all(key in other and other[key][0] == coefficient for other in exponents[1:])]
    if not common:
        return log_term
    shift = normal_form(z3.Sum([z3.RealVal(coefficient) * monomial for coefficient, monomial in common]))
    inner = z3.Sum([weight * application.decl()(normal_form(application.arg(0) - shift))
                    for weight, application in parts])
    return shift + log_term.decl()(normal_form(inner))


def _weighted_exp(summand: z3.ExprRef):
    """(positive rational weight, the exp application) of ``k * exp(a)``, else None."""
    if _is_exp(summand):
        return z3.RealVal(1), summand
    if z3.is_mul(summand) and summand.num_args() == 2:
        weight, factor = summand.children()
        if z3.is_rational_value(weight) and weight.as_fraction() > 0 and _is_exp(factor):
            return weight, factor
    return None


def _monomials(polynomial: z3.ExprRef) -> dict:
    """term id of each monomial (None for the constant) -> (rational coefficient, monomial)."""
    out = {}
    for term in (polynomial.children() if z3.is_add(polynomial) else [polynomial]):
        if z3.is_rational_value(term):
            out[None] = (term.as_fraction(), z3.RealVal(1))
        elif z3.is_mul(term) and term.num_args() == 2 and z3.is_rational_value(term.arg(0)):
            out[term.arg(1).get_id()] = (term.arg(0).as_fraction(), term.arg(1))
        else:
            out[term.get_id()] = (1, term)
    return out
