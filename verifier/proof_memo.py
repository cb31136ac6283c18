"""Proofs remembered up to a renaming of the unknowns.

An element-wise proof asks the solver the same question once per element: the claim for
``out[i, h]`` is the claim for ``out[0, 0]`` with ``ids[i]`` for ``ids[0]`` and column ``h`` of
the table for column 0.  A claim that is a renaming of one already refuted (a bijection of
its unknowns, sorts kept, applied to the claim together with the domain constraints on those
unknowns) is refuted too, so it is not asked again.

The key of a claim is Z3's own SMT-LIB text of (its domain constraints, the claim) with every
declared symbol replaced by its sort and its order of first appearance: two claims with
equal keys are renamings of each other.  Why the domain may be cut to the constraints that
share unknowns with the claim: ``D = D_rel & D_rest`` with ``D_rest`` over other unknowns;
if ``D & d1`` is unsatisfiable then either ``D`` is (and every claim holds under it) or
``D_rel & d1`` is, and then so is its renaming ``D_rel' & d2``, a part of ``D & d2``.
"""
from __future__ import annotations

import re

import z3

_DECLARATION = re.compile(r"\(declare-fun (\|[^|]*\||[^\s()|]+) (.*)\)$")
_LET = r"[a-z]!\d+|[?$]x\d+"  # the printer's names for shared subterms (by term id)
_LET_NAME = re.compile(rf"^(?:{_LET})$")
_TOKEN = r"(?<![^\s()])(?:{})(?![^\s()])"  # a whole token, between spaces and parentheses


def smtlib_parts(formula: z3.BoolRef) -> tuple[dict[str, str], str] | None:
    """The declared symbols of ``formula`` (name -> signature) and its assertion text, or None
    when the declarations hold anything but plain symbols (sorts, datatypes).  The printer names
    the subterms that are shared in the whole context (not only in ``formula``), so a renaming
    built in other company may print otherwise: a missed reuse, never a wrong one."""
    text = z3.Z3_benchmark_to_smtlib_string(formula.ctx.ref(), "", "", "unknown", "", 0, (z3.Ast * 0)(),
                                            formula.as_ast())
    symbols: dict[str, str] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("(declare-fun "):
            match = _DECLARATION.match(line)
            if match is None or _LET_NAME.match(match.group(1)):
                return None
            symbols[match.group(1)] = match.group(2)
        elif line.startswith("(assert"):
            return symbols, "\n".join(lines[number:])
        elif line and not line.startswith((";", "(set-info")):
            return None
    return None


class ProofMemo:
    """Keys of the claims refuted so far under one domain (a list of constraints); ``tally``
    counts the claims skipped as renamings (``renamings_skipped``)."""

    def __init__(self, domain: list, tally: dict) -> None:
        self.refuted: set[str] = set()
        self.tally = tally
        self.tally.setdefault("renamings_skipped", 0)
        self._domain = [smtlib_parts(constraint) for constraint in domain]  # (symbols, text) each
        self._printable = all(parts is not None for parts in self._domain)  # else no key is sound
        self._constraints_of: dict[str, list[int]] = {}
        for position, parts in enumerate(self._domain):
            for name in (parts[0] if parts is not None else ()):
                self._constraints_of.setdefault(name, []).append(position)
        self._patterns: dict[tuple[str, ...], re.Pattern] = {}

    def key(self, claim: z3.BoolRef) -> str | None:
        """The claim's text up to a renaming of its unknowns, with the domain constraints on them."""
        parts = smtlib_parts(claim)
        if parts is None or not self._printable:
            return None
        symbols, related, todo = dict(parts[0]), set(), list(parts[0])
        while todo:  # constraints sharing unknowns with the claim, transitively
            for position in self._constraints_of.get(todo.pop(), ()):
                if position not in related:
                    related.add(position)
                    fresh = [name for name in self._domain[position][0] if name not in symbols]
                    symbols.update(self._domain[position][0])
                    todo += fresh
        text = "\n".join([self._domain[p][1] for p in sorted(related)] + [parts[1]])
        pieces = self._pattern(symbols).split(text)  # text, token, text, token, ..., text
        names: dict[str, str] = {}
        order: list[str] = []
        bound = 0
        for token in dict.fromkeys(pieces[1::2]):  # in order of first appearance
            if token in symbols:
                names[token] = f"#{len(order)}"
                order.append(token)
            elif _LET_NAME.match(token):  # bound by a let before any use: renamed alike
                names[token] = f"@{bound}"
                bound += 1
            else:
                return None  # a quoted name the declarations do not give
        pieces[1::2] = [names[token] for token in pieces[1::2]]
        # line breaks follow the names' lengths: layout is not part of the key
        return " ".join(symbols[name] for name in order) + "\n" + " ".join("".join(pieces).split())

    def _pattern(self, symbols: dict[str, str]) -> re.Pattern:
        """Tokens that may need renaming: quoted symbols, let names, the unquoted declared names."""
        plain = tuple(sorted(name for name in symbols if not name.startswith("|")))
        if plain not in self._patterns:
            whole = [_TOKEN.format(_LET)] + [_TOKEN.format(re.escape(name)) for name in plain]
            self._patterns[plain] = re.compile(r"(\|[^|]*\||" + "|".join(whole) + ")")
        return self._patterns[plain]
