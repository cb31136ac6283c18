"""Walks over Z3 terms through Z3's C API, each shared subterm once.

The Python API wraps every child it hands out in an ``ExprRef`` whose reference counting costs a
few C calls more than the step itself: a walk over a kernel's output terms (220,000 shared nodes for
TileLang's convolution example) took 14.7 CPU s that way and 1.5 s here.  Children are read as raw
pointers, kept alive by the terms passed in for as long as the walk runs.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import z3

_ID = z3.Z3_get_ast_id
_KIND = z3.Z3_get_ast_kind
_DECL = z3.Z3_get_app_decl
_ARITY = z3.Z3_get_app_num_args
_ARG = z3.Z3_get_app_arg
_DECL_ID = z3.Z3_get_func_decl_id
_APPS = (z3.Z3_APP_AST, z3.Z3_NUMERAL_AST)  # z3py's is_app: a numeral is an application too


def _exprs(terms: Iterable[Any]) -> list[z3.ExprRef]:
    return [t for t in terms if z3.is_expr(t)]


def mentions(terms: Iterable[Any], wanted: Callable[[str], bool], memo: dict[int, bool] | None = None) -> bool:
    """Whether an application (a constant included) whose declaration's name ``wanted`` accepts occurs
    in ``terms``.  ``memo`` (term id -> answer), kept by the caller across calls on terms that share
    subterms, spares walking them again."""
    exprs = _exprs(terms)
    if not exprs:
        return False
    memo = {} if memo is None else memo
    ctx, names = exprs[0].ctx, {}
    ref = ctx.ref()
    stack = [(t.as_ast(), False) for t in exprs]
    while stack:
        node, expanded = stack.pop()
        key = _ID(ref, node)
        if key in memo:
            continue
        if _KIND(ref, node) not in _APPS:
            memo[key] = False
            continue
        decl = _DECL(ref, node)
        hit = names.get(_DECL_ID(ref, decl))
        if hit is None:
            hit = names[_DECL_ID(ref, decl)] = wanted(z3.FuncDeclRef(decl, ctx).name())
        if hit:
            memo[key] = True
            return True
        arity = _ARITY(ref, node)
        if expanded:
            memo[key] = any(memo[_ID(ref, _ARG(ref, node, k))] for k in range(arity))
        else:
            stack.append((node, True))
            stack.extend((_ARG(ref, node, k), False) for k in range(arity))
    return any(memo[t.get_id()] for t in exprs)


def uninterpreted_declarations(terms: Iterable[Any], seen: set[int] | None = None) -> list[z3.FuncDeclRef]:
    """The uninterpreted functions (arity at least one) the terms apply; sub-terms whose id is in
    ``seen`` are skipped, and every visited one is added to it."""
    exprs = _exprs(terms)
    if not exprs:
        return []
    seen = set() if seen is None else seen
    ctx, decls, found = exprs[0].ctx, set(), []
    ref = ctx.ref()
    stack = [t.as_ast() for t in exprs]
    while stack:
        node = stack.pop()
        key = _ID(ref, node)
        if key in seen:
            continue
        seen.add(key)
        if _KIND(ref, node) not in _APPS:
            continue
        arity = _ARITY(ref, node)
        if not arity:
            continue
        decl = _DECL(ref, node)
        if _DECL_ID(ref, decl) not in decls:
            decls.add(_DECL_ID(ref, decl))
            if z3.Z3_get_decl_kind(ref, decl) == z3.Z3_OP_UNINTERPRETED:
                found.append(z3.FuncDeclRef(decl, ctx))
        stack.extend(_ARG(ref, node, k) for k in range(arity))
    return found


def free_constants(term: Any, skipped: Callable[[str], bool] = lambda name: False) -> list[z3.ExprRef]:
    """The unknowns of ``term`` (uninterpreted constants), in order of first appearance in a
    left-to-right walk that visits each shared subterm once: two terms that are renamings of each
    other list corresponding unknowns at the same positions.  Constants whose name ``skipped``
    accepts are left out."""
    if not z3.is_expr(term):
        return []
    return [z3.z3._to_expr_ref(node, term.ctx) for node in _free_constant_asts(term, skipped, {})]


def _free_constant_asts(term: z3.ExprRef, skipped: Callable[[str], bool], names: dict[int, bool],
                        seen: set[int] | None = None) -> list:
    """``free_constants`` as raw ASTs (alive as long as ``term``); ``names``: declaration id ->
    whether ``skipped`` accepts it, shared by the caller across calls; ``seen``: the ids of the
    subterms walked (filled in)."""
    ctx = term.ctx
    ref = ctx.ref()
    seen = set() if seen is None else seen
    found: list = []
    stack = [term.as_ast()]
    while stack:
        node = stack.pop()
        key = _ID(ref, node)
        if key in seen:
            continue
        seen.add(key)
        if _KIND(ref, node) != z3.Z3_APP_AST:
            continue
        arity = _ARITY(ref, node)
        if not arity:
            decl = _DECL(ref, node)
            if z3.Z3_get_decl_kind(ref, decl) == z3.Z3_OP_UNINTERPRETED:
                decl_id = _DECL_ID(ref, decl)
                if decl_id not in names:
                    names[decl_id] = skipped(z3.FuncDeclRef(decl, ctx).name())
                if not names[decl_id]:
                    found.append(node)
            continue
        stack.extend(_ARG(ref, node, k) for k in reversed(range(arity)))
    return found


class Renamings:
    """Keys of terms up to a renaming of their unknowns: the id of the term with its unknowns
    replaced, in order of first appearance, by canonical constants of their sorts (Z3 shares equal
    terms, so two terms get one key exactly when one is a renaming of the other).  The renamed
    terms are kept alive, so no id is reused while keys are compared.  Constants whose name
    ``skipped`` accepts are not renamed."""

    def __init__(self, skipped: Callable[[str], bool] = lambda name: False) -> None:
        self._skipped = skipped
        self._names: dict[int, bool] = {}
        self._canonical: dict[tuple[int, int], z3.ExprRef] = {}  # (position, sort id) -> constant
        self._alive: list[z3.ExprRef] = []
        self.visited = 0  # subterms walked over all keys so far (one claim's shared ones once)

    def key(self, term: z3.ExprRef, extra: Callable[[list[int]], list[z3.ExprRef]] | None = None
            ) -> tuple[int, list[int]]:
        """(key, the ids of the renamed unknowns in order); ``extra(ids)`` gives constraints on those
        unknowns that belong to the term (renamed with it: part of the key)."""
        ctx = term.ctx
        ref = ctx.ref()
        seen: set[int] = set()
        nodes = _free_constant_asts(term, self._skipped, self._names, seen)
        self.visited += len(seen)
        ids = [_ID(ref, node) for node in nodes]
        constraints = extra(ids) if extra is not None else []
        whole = z3.And(term, *constraints) if constraints else term
        if not nodes:
            self._alive.append(whole)
            return whole.get_id(), ids
        sources, targets = (z3.Ast * len(nodes))(), (z3.Ast * len(nodes))()
        for position, node in enumerate(nodes):
            sort = z3.Z3_get_sort(ref, node)
            slot = (position, z3.Z3_get_sort_id(ref, sort))
            if slot not in self._canonical:
                self._canonical[slot] = z3.Const(f"!{position}", z3.SortRef(sort, ctx))
            sources[position], targets[position] = node, self._canonical[slot].as_ast()
        renamed = z3.z3._to_expr_ref(z3.Z3_substitute(ref, whole.as_ast(), len(nodes), sources, targets), ctx)
        self._alive.append(renamed)
        return renamed.get_id(), ids
