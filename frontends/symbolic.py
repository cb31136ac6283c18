"""Python-level integers of the user's program, kept symbolic with sympy.

Module-level integer constants (``HIDDEN = 32``) become dim symbols, so the program can be
checked on reduced shapes; ``dist.get_world_size()`` is the size of a mesh dim and
``dist.get_rank()`` its coordinate, both symbols.  Every equality or divisibility the
translation relies on but cannot prove symbolically (it holds for the file's values) is
recorded as a ``require`` of the IR program, and a value the IR needs as a plain number (a
chunk count, a loop bound) pins its symbols to the file's values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from verifier.ir import Mesh

from .sizes import to_sym


class ShapeMismatch(Exception):
    """Two sizes that must agree do not (with the file's values)."""

    def __init__(self, message: str, concrete: bool = False):
        self.concrete = concrete
        super().__init__(message)


def is_number(value) -> bool:
    return isinstance(value, sp.Basic) and value.is_number


@dataclass
class Dims:
    """The dim symbols of one translation and what the translation assumed about them."""

    mesh: Mesh
    values: dict[sp.Symbol, int] = field(default_factory=dict)  # constant symbol -> the file's value
    requires: list[str] = field(default_factory=list)
    pinned: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.rank = {name: sp.Symbol(f"{name}@rank", integer=True, nonnegative=True) for name in self.mesh.names}
        self.size = {name: sp.Symbol(f"{name}@size", integer=True, positive=True) for name in self.mesh.names}
        self.mesh_values = {self.size[name]: size for name, size in self.mesh.dims}

    # -- symbols ------------------------------------------------------------------------
    def constant(self, name: str, value: int) -> sp.Expr:
        """A module-level integer constant: a symbol when it is a size worth reducing."""
        if value < 2:
            return sp.Integer(value)
        ir_name = name
        reserved = set(self.mesh.names) | {f"{n}_size" for n in self.mesh.names} | {"world"}
        while ir_name in reserved or any(str(s) == ir_name for s in self.values):
            ir_name += "_"
        symbol = sp.Symbol(ir_name, integer=True, positive=True)
        self.values[symbol] = value
        return symbol

    def world(self, mesh_dims: tuple[str, ...]) -> sp.Expr:
        return sp.Mul(*[self.size[d] for d in mesh_dims])

    def global_rank(self, mesh_dims: tuple[str, ...]) -> sp.Expr:
        """Row-major rank over ``mesh_dims`` (the layout of ``torch.distributed`` ranks)."""
        rank = sp.Integer(0)
        for d in mesh_dims:
            rank = rank * self.size[d] + self.rank[d]
        return sp.expand(rank)

    def mesh_symbols(self) -> set[sp.Symbol]:
        return set(self.rank.values()) | set(self.size.values())

    def depends_on_mesh(self, expr) -> bool:
        return isinstance(expr, sp.Basic) and bool(expr.free_symbols & self.mesh_symbols())

    def depends_on_rank(self, expr) -> bool:
        return isinstance(expr, sp.Basic) and bool(expr.free_symbols & set(self.rank.values()))

    def depends_on_size(self, expr) -> bool:
        return isinstance(expr, sp.Basic) and bool(expr.free_symbols & set(self.size.values()))

    # -- concrete values ----------------------------------------------------------------
    def concrete(self, expr):
        """The file's value of ``expr`` on the real mesh (rank symbols must not occur)."""
        if not isinstance(expr, sp.Basic):
            return expr
        value = expr.subs(self.values).subs(self.mesh_values)
        if value.free_symbols:
            raise ValueError(f"{expr} depends on the rank")
        if value.is_Integer:
            return int(value)
        if value.is_Rational and value.q == 1:
            return int(value.p)
        if value in (sp.true, sp.false):
            return bool(value)
        return float(value)

    def pin(self, expr) -> int | float:
        """Use the file's value of ``expr`` as a plain number: its symbols stop being reducible."""
        for symbol in sorted(expr.free_symbols & set(self.values), key=str) if isinstance(expr, sp.Basic) else ():
            if str(symbol) not in self.pinned:
                self.pinned.add(str(symbol))
                self.require(f"{symbol} == {self.values[symbol]}")
        return self.concrete(expr)

    def at_mesh(self, expr):
        """``expr`` with the mesh sizes replaced by the real mesh's sizes."""
        return to_sym(expr).subs(self.mesh_values) if isinstance(expr, sp.Basic) else expr

    # -- assumptions --------------------------------------------------------------------
    def require(self, text: str) -> None:
        if text not in self.requires:
            self.requires.append(text)

    def unify(self, a, b, what: str) -> None:
        """Assume ``a == b`` (two sizes that must agree), recording a requirement if needed."""
        a, b = to_sym(a), to_sym(b)
        if sp.cancel(a - b) == 0:
            return
        if self.depends_on_rank(a) or self.depends_on_rank(b):
            raise ShapeMismatch(f"{what}: sizes {a} and {b} depend on the rank")
        if self.concrete(a) != self.concrete(b):
            raise ShapeMismatch(f"{what}: {self.concrete(a)} != {self.concrete(b)}", concrete=True)
        numerator = sp.expand(sp.fraction(sp.together(self.at_mesh(a) - self.at_mesh(b)))[0])
        if numerator == 0:
            return
        positive = sp.Add(*[t for t in sp.Add.make_args(numerator) if t.could_extract_minus_sign() is False])
        negative = -sp.Add(*[t for t in sp.Add.make_args(numerator) if t.could_extract_minus_sign() is True])
        if not (self.printable(positive) and self.printable(negative)):
            self.pin(a)
            self.pin(b)
            return
        self.require(f"{self.format(positive)} == {self.format(negative)}")

    def divisible(self, expr, divisor) -> None:
        """Assume ``divisor`` divides ``expr`` exactly."""
        expr, divisor = self.at_mesh(to_sym(expr)), self.at_mesh(to_sym(divisor))
        quotient = sp.cancel(expr / divisor)
        if _integer_polynomial(quotient):
            return
        value, by = self.concrete(expr), self.concrete(divisor)
        if not isinstance(value, int) or not isinstance(by, int) or by == 0 or value % by:
            raise ShapeMismatch(f"{value} is not divisible by {by}")
        # the quotient is integral exactly when its numerator is a multiple of its denominator
        numerator, denominator = sp.fraction(sp.together(quotient))
        numerator, denominator = sp.expand(numerator), sp.expand(denominator)
        if self.printable(numerator) and self.printable(denominator):
            self.require(f"{self.format(numerator, atom=True)} % {self.format(denominator, atom=True)} == 0")
        else:
            self.pin(expr)
            self.pin(divisor)

    def floordiv(self, a, b):
        """Python ``a // b`` on sizes: exact division when the file's values divide."""
        a, b = to_sym(a), to_sym(b)
        if a.is_number and b.is_number:
            return sp.Integer(int(a) // int(b))
        try:
            value, by = self.concrete(a), self.concrete(b)
        except ValueError:
            value = by = None
        if isinstance(value, int) and isinstance(by, int) and by and value % by == 0:
            quotient = sp.cancel(a / b)
            if not _integer_polynomial(quotient) and not self.depends_on_rank(quotient):
                self.divisible(a, b)
            return quotient
        if self.depends_on_rank(a) or self.depends_on_rank(b):
            return sp.floor(a / b)
        return sp.Integer(self.pin(a) // self.pin(b))

    # -- printing -----------------------------------------------------------------------
    def printable(self, expr) -> bool:
        try:
            self.format(expr)
            return True
        except ValueError:
            return False

    def format(self, expr, *, atom: bool = False, names: dict | None = None) -> str:
        """An IR expression: ``+ - * / % **`` over ints and names (``/`` is exact division)."""
        names = names or {}
        text = _Printer(names).print(to_sym(expr))
        if atom and not _is_atomic(text):
            return f"({text})"
        return text

    def dim(self, expr):
        """An IR dim (int or expression string) for a size free of mesh symbols."""
        expr = to_sym(expr)
        if self.depends_on_mesh(expr):
            raise ValueError(f"size {expr} depends on the mesh")
        if expr.is_Integer:
            return int(expr)
        try:
            quotient_ok = _integer_polynomial(expr)
            text = self.format(expr)
        except ValueError:
            return self.pin(expr)
        if not quotient_ok:
            numerator, denominator = sp.fraction(sp.together(expr))
            self.divisible(numerator, denominator)
        return text

    def mesh_expr(self, expr) -> str:
        """An expression over mesh coordinates for ``peer=`` / ``when=``: ``tp``, ``tp_size``."""
        names = {}
        for name in self.mesh.names:
            names[self.rank[name]] = name
            names[self.size[name]] = f"{name}_size"
        for symbol, value in self.values.items():
            names[symbol] = str(self.pin(symbol))
        return self.format(expr, names=names)


def _integer_polynomial(expr) -> bool:
    expr = to_sym(expr)
    if expr.is_Integer:
        return True
    try:
        poly = sp.Poly(expr, *sorted(expr.free_symbols, key=str)) if expr.free_symbols else None
    except sp.PolynomialError:
        return False
    if poly is None:
        return bool(expr.is_Integer)
    return all(c.is_Integer for c in poly.coeffs())


def _is_atomic(text: str) -> bool:
    return text.replace("_", "").isalnum()


class _Printer:
    """sympy -> the IR's expression syntax (Python operators, ``/`` exact)."""

    def __init__(self, names: dict):
        self.names = names

    def print(self, expr) -> str:
        relations = {sp.Eq: "==", sp.Ne: "!=", sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">",
                     sp.GreaterThan: ">="}
        for cls, operator in relations.items():
            if isinstance(expr, cls):
                return f"{self.print(expr.lhs)} {operator} {self.print(expr.rhs)}"
        if isinstance(expr, sp.Not):
            return f"not ({self.print(expr.args[0])})"
        if isinstance(expr, (sp.And, sp.Or)):
            joiner = " and " if isinstance(expr, sp.And) else " or "
            return joiner.join(f"({self.print(a)})" for a in expr.args)
        if expr is sp.true or expr is sp.false:
            return "1 == 1" if expr is sp.true else "1 == 0"
        if isinstance(expr, sp.Symbol):
            return self.names.get(expr, str(expr))
        if expr.is_Integer:
            return str(int(expr))
        if expr.is_Rational:
            return f"{expr.p}/{expr.q}"
        if isinstance(expr, sp.Mod):
            return f"{self.wrap(expr.args[0])} % {self.wrap(expr.args[1])}"
        if isinstance(expr, sp.Add):
            terms = sorted(expr.args, key=lambda t: (t.is_number, sp.default_sort_key(t)))
            text = self.print(terms[0])
            for term in terms[1:]:
                if term.could_extract_minus_sign():
                    text += f" - {self.wrap_mul(-term)}"
                else:
                    text += f" + {self.wrap_mul(term)}"
            return text
        if isinstance(expr, sp.Mul):
            numerator, denominator = sp.fraction(expr)
            if denominator != 1:
                return f"{self.wrap(numerator)}/{self.wrap(denominator)}"
            coeff, rest = expr.as_coeff_Mul()
            if coeff == -1:
                return f"-{self.wrap(rest)}"
            factors = [self.wrap(f) for f in sp.Mul.make_args(expr)]
            return "*".join(factors)
        if isinstance(expr, sp.Pow):
            base, exponent = expr.args
            if exponent.is_Integer and exponent > 0:
                return "*".join([self.wrap(base)] * int(exponent))  # no ** : Z3 reads it as a real power
            if exponent.is_Integer and exponent < 0:
                return f"1/{self.wrap(base ** -exponent)}"
        raise ValueError(f"cannot write {expr} as an IR expression")

    def wrap(self, expr) -> str:
        text = self.print(expr)
        return text if _is_atomic(text) else f"({text})"

    def wrap_mul(self, expr) -> str:
        text = self.print(expr)
        return f"({text})" if isinstance(expr, (sp.Add, sp.Mod)) else text


__all__ = ["Dims", "ShapeMismatch", "is_number"]
