"""Sums of conditional terms in one canonical form: ``m * If(c, a, b)`` becomes
``If(c, m*a, m*b)`` and the terms of a sum that test the same condition merge into one
``If(c, sum of a, sum of b)``.

Z3's sum-of-monomials simplifier keeps an ``If`` as an opaque factor, so a gradient averaged
in two steps (``1/2 * If(relu, 1/8 * g, 0)`` on a rank, ``If(relu, 1/16 * g, 0)`` on one
device) does not cancel.  Both rewrites are identities of real arithmetic, so a difference
that becomes 0 here is 0; anything else decides nothing.
"""
from __future__ import annotations

import z3

from .backends import normal_form
from .term_walk import mentions


def mentions_conditionals(term: z3.ExprRef, memo: dict[int, bool] | None = None) -> bool:
    """Whether an ``If`` occurs in ``term`` (``memo`` as for ``exp_identity.mentions``)."""
    return mentions([term], lambda name: name == "if", memo)


def _is_conditional(term: z3.ExprRef) -> bool:
    return z3.is_app_of(term, z3.Z3_OP_ITE) and z3.is_arith(term)


def _scaled(term: z3.ExprRef) -> tuple[z3.ExprRef | None, z3.ExprRef]:
    """(factor, conditional) when ``term`` is a product with one conditional factor, else (None, term)."""
    if z3.is_mul(term):
        children = _factors(term)
        conditionals = [i for i, child in enumerate(children) if _is_conditional(child)]
        if len(conditionals) == 1:
            rest = [child for i, child in enumerate(children) if i != conditionals[0]]
            return (rest[0] if len(rest) == 1 else z3.Product(rest)), children[conditionals[0]]
    return None, term


def _factors(product: z3.ExprRef) -> list[z3.ExprRef]:
    """The factors of a product, nested products flattened (``1/2 * (x * If(...))``)."""
    out, stack = [], [product]
    while stack:
        node = stack.pop()
        if z3.is_mul(node):
            stack.extend(reversed(node.children()))
        else:
            out.append(node)
    return out


def merge_conditionals(term: z3.ExprRef, rounds: int = 3) -> z3.ExprRef:
    """``term`` (a normal form) with the factors of a product pushed into its one conditional and the
    conditionals of every sum grouped by condition, bottom-up, until nothing changes (the
    normal form may distribute a factor over a merged sum again)."""
    for _ in range(rounds):
        merged = _merge_once(term)
        if merged.eq(term) or z3.is_rational_value(merged):
            return merged
        term = merged
    return term


_MERGED: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}  # AST id -> (term, merged); the term keeps its id its own


def _merge_once(term: z3.ExprRef) -> z3.ExprRef:
    if len(_MERGED) > 200_000:
        _MERGED.clear()

    def walk(node: z3.ExprRef) -> z3.ExprRef:
        key = node.get_id()
        known = _MERGED.get(key)
        if known is not None:
            return known[1]
        if not z3.is_app(node) or node.num_args() == 0:
            result = node
        else:
            originals = node.children()
            conditional = _is_conditional(node)
            children = [child if conditional and i == 0 else walk(child) for i, child in enumerate(originals)]
            if z3.is_add(node):
                result = _merged_sum(children)
            elif all(a.eq(b) for a, b in zip(children, originals)):
                result = node
            elif conditional:
                result = z3.If(children[0], normal_form(children[1]), normal_form(children[2]))
            else:
                result = node.decl()(*children)
        _MERGED[key] = (node, result)
        return result

    return normal_form(walk(term))


def _merged_sum(terms: list[z3.ExprRef]) -> z3.ExprRef:
    by_condition: dict[int, list] = {}
    rest = []
    for term in terms:
        factor, conditional = _scaled(term)
        if not _is_conditional(conditional):
            rest.append(term)
            continue
        condition, then, otherwise = conditional.children()
        if factor is not None:
            then, otherwise = factor * then, factor * otherwise
        entry = by_condition.setdefault(condition.get_id(), [condition, [], []])
        entry[1].append(then)
        entry[2].append(otherwise)
    for condition, thens, otherwises in by_condition.values():
        then, otherwise = _expanded(z3.Sum(thens)), _expanded(z3.Sum(otherwises))
        rest.append(then if then.eq(otherwise) else z3.If(condition, then, otherwise))
    return rest[0] if len(rest) == 1 else z3.Sum(rest)


# Z3's sum-of-monomials form gives up on a product whose expansion has more than ``som_blowup``
# (default 10) times its monomials: ``-1 * (x0*w0 + ... + x31*w31) * g`` (the single device's
# expert output, subtracted) stayed a product while the ranks' halves, 16 terms each, were
# expanded, so a difference of 0 did not cancel.  The branches merged here are sums of the same
# few products, so expanding them fully costs as much as the terms are long.
SOM_BLOWUP = 1_000


def _expanded(term: z3.ExprRef) -> z3.ExprRef:
    return z3.simplify(term, som=True, som_blowup=SOM_BLOWUP)
