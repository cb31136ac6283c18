"""Quotients by one divisor added up: ``a/d + b/d = (a + b)/d``.

Z3's ``simplify`` keeps a quotient whole, so a loss that each rank divides by the global count of
real tokens and the ranks then sum (``sum_r a_r / d``) does not meet the single device's
``(sum_r a_r) / d`` in sum-of-monomials form.  This module writes every quotient ``x / d`` whose
divisor is not a number as ``x * r_d``, with ``r_d`` one fresh variable per divisor (two divisors
are one when their difference is zero in normal form), and normalises again.  A difference that
becomes the zero polynomial in those variables is zero for every value of ``r_d``, in particular
``1/d``: the identity holds exactly over the reals wherever the divisors are non-zero (the
verifier's real-arithmetic reading; IEEE's ``x/0`` is not a real number).
"""
from __future__ import annotations

import z3

from .backends import is_zero, normal_form, rebuilt


def mentions_quotients(term: z3.ExprRef, memo: dict[int, bool]) -> bool:
    """Does ``term`` hold a real division by something other than a number?"""
    stack, seen = [term], set()
    while stack:
        node = stack.pop()
        key = node.get_id()
        if key in memo:
            if memo[key]:
                return True
            continue
        if key in seen or not z3.is_app(node):
            continue
        seen.add(key)
        if z3.is_div(node) and not z3.is_rational_value(node.arg(1)):
            memo[key] = True
            return True
        stack.extend(node.children())
    for key in seen:
        memo[key] = False
    return False


def quotients_combine(difference: z3.ExprRef) -> bool:
    """Is ``difference`` zero once every quotient ``x / d`` reads ``x * r_d``?"""
    reciprocals: list[tuple[z3.ExprRef, z3.ExprRef]] = []   # (divisor, its variable)

    def reciprocal(divisor: z3.ExprRef) -> z3.ExprRef:
        for known, variable in reciprocals:
            if known.eq(divisor) or is_zero(normal_form(known - divisor)):
                return variable
        reciprocals.append((divisor, z3.FreshReal("reciprocal")))
        return reciprocals[-1][1]

    def by_reciprocal(node: z3.ExprRef, children: list) -> z3.ExprRef | None:
        if z3.is_div(node) and not z3.is_rational_value(children[1]):
            return children[0] * reciprocal(children[1])
        return None

    rewritten = rebuilt(difference, by_reciprocal)
    return bool(reciprocals) and is_zero(normal_form(rewritten))
