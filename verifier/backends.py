"""Two numeric backends behind one interface, so every op is written once.

An op's evaluator is ordinary NumPy code over arrays plus calls to the backend for what is
not plain arithmetic.  With ``NumpyBackend`` the arrays hold float64/int64 numbers (the
concrete evaluator, used to re-check counterexamples); with ``Z3Backend`` they are object
arrays of Z3 terms (the symbolic encoding).  Linear algebra is therefore exact over the reals
in Z3, and each non-linear op becomes an uninterpreted function of exactly the values it
reads (``softmax`` of a row of length n gives n functions of that row).  Arguments of
uninterpreted functions are put in a normal form first so equal arguments give equal terms.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import z3
from z3.z3 import _to_expr_ref


class EvalError(Exception):
    """The program cannot run on these values (index out of range, bad shapes...)."""


class TorchRaises(EvalError):
    """torch itself raises on these values (an id or class index outside the table): a run that
    hits it fails for real, it is not a limit of the evaluator."""


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[float])(x)


def _erfinv(x: np.ndarray) -> np.ndarray:
    """Inverse of erf on (-1, 1) (+-inf at +-1): Winitzki's closed form refined by Newton's method to
    double precision (a normal quantile: Gemma3n's activation sparsity)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(all="ignore"):
        ln = np.log((1.0 - x) * (1.0 + x))
        t = 2.0 / (math.pi * 0.147) + ln / 2.0
        y = np.sign(x) * np.sqrt(np.sqrt(t * t - ln / 0.147) - t)
        for _ in range(4):
            y = y - (_erf(y) - x) / (2.0 / math.sqrt(math.pi) * np.exp(-y * y))
        y = np.where(np.abs(x) == 1.0, np.sign(x) * np.inf, y)
    return np.where(np.abs(x) > 1.0, np.nan, y)


_NUMPY_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "cos": np.cos,   # rotary position embeddings
    "sin": np.sin,
    "erfinv": _erfinv,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    # derivatives, used by generated backward programs
    "dgelu": lambda x: 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi),
    "dsilu": lambda x: (1.0 / (1.0 + np.exp(-x))) * (1.0 + x * (1.0 - 1.0 / (1.0 + np.exp(-x)))),
    "dgelu_tanh": lambda x: _dgelu_tanh(x),
}


def _dgelu_tanh(x: np.ndarray) -> np.ndarray:
    c = math.sqrt(2.0 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)


def _layer_norm_backward(x: np.ndarray, eps: float, grad: np.ndarray) -> np.ndarray:
    sigma = np.sqrt(x.var(-1, keepdims=True) + eps)
    xhat = (x - x.mean(-1, keepdims=True)) / sigma
    return (grad - grad.mean(-1, keepdims=True) - xhat * (grad * xhat).mean(-1, keepdims=True)) / sigma


def _rms_norm_backward(x: np.ndarray, eps: float, grad: np.ndarray) -> np.ndarray:
    inverse = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    y = x * inverse
    return inverse * (grad - y * (grad * y).mean(-1, keepdims=True))


def _softmax(row: np.ndarray) -> np.ndarray:
    shifted = np.exp(row - row.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


_NUMPY_ROWWISE: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "softmax": lambda x, eps: _softmax(x),
    "log_softmax": lambda x, eps: np.log(_softmax(x)),
    "layer_norm": lambda x, eps: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps),
    "rms_norm": lambda x, eps: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps),
}
_NUMPY_ROWWISE_WITH_GRAD: dict[str, Callable[[np.ndarray, float, np.ndarray], np.ndarray]] = {
    "layer_norm_backward": _layer_norm_backward,
    "rms_norm_backward": _rms_norm_backward,
}


class NumpyBackend:
    symbolic = False

    def is_int(self, array: np.ndarray) -> bool:
        return np.asarray(array).dtype.kind in "iub"

    def unary(self, name: str, x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return _NUMPY_UNARY[name](np.asarray(x, dtype=float))

    def rowwise(self, name: str, x: np.ndarray, eps: float = 0.0, grad: np.ndarray | None = None) -> np.ndarray:
        """Apply a normalisation (or its backward, given the incoming ``grad``) over the last dim."""
        with np.errstate(all="ignore"):
            if grad is not None:
                return _NUMPY_ROWWISE_WITH_GRAD[name](np.asarray(x, dtype=float), eps, np.asarray(grad, dtype=float))
            return _NUMPY_ROWWISE[name](np.asarray(x, dtype=float), eps)

    def matmul(self, a, b):
        return np.matmul(a, b)

    def divide(self, a, b):
        return np.divide(a, b)

    def floordiv(self, a, b):
        return np.floor_divide(a, b)

    def mod(self, a, b):
        return np.mod(a, b)

    def maximum(self, a, b):
        return np.maximum(a, b)

    def maximum_of(self, parts: list):
        return functools.reduce(np.maximum, parts)

    def minimum(self, a, b):
        return np.minimum(a, b)

    def where(self, cond, a, b):
        return np.where(np.asarray(cond, dtype=bool), a, b)

    def compare(self, op: str, a, b):
        return {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                "eq": np.equal, "ne": np.not_equal}[op](a, b)

    def logical(self, op: str, a, b=None):
        if op == "not":
            return np.logical_not(a)
        return {"and": np.logical_and, "or": np.logical_or}[op](a, b)

    def take_rows(self, table: np.ndarray, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
            raise TorchRaises(f"index out of range: ids in [{ids.min()}, {ids.max()}] for a table of {table.shape[0]} rows")
        return table[ids]

    def pick(self, rows: np.ndarray, index: np.ndarray) -> np.ndarray:
        """rows[..., index[...]]: the entry of each row named by an integer tensor."""
        index = np.asarray(index)
        if index.size and (index.min() < 0 or index.max() >= rows.shape[-1]):
            raise TorchRaises(f"class index out of range for {rows.shape[-1]} classes")
        return np.take_along_axis(rows, index[..., None], axis=-1)[..., 0]

    def zeros(self, shape, dtype: str = "f32"):
        return np.zeros(shape, dtype=np.int64 if dtype.startswith("i") else np.float64)

    def full(self, shape, value, dtype: str = "f32"):
        return np.full(shape, value, dtype=np.int64 if dtype.startswith("i") else np.float64)

    def cast(self, x, dtype: str):
        if dtype.startswith("i"):
            return np.asarray(x).astype(np.int64)
        if dtype == "bool":
            return np.asarray(x).astype(bool)
        return np.asarray(x).astype(np.float64)


def objectwise(function: Callable, *arrays) -> np.ndarray:
    result = np.frompyfunc(function, len(arrays), 1)(*arrays)
    return np.asarray(result, dtype=object)


def _elementwise(function: Callable, *arrays):
    """Like NumPy arithmetic on object arrays: 0-d operands give a plain term, not a 0-d array."""
    result = objectwise(function, *arrays)
    return result.item() if result.ndim == 0 else result


_NORMAL_FORMS: dict[int, tuple] = {}  # AST id -> (term, normal form); the term is kept so the id stays its own


def normal_form(term):
    """A canonical sum-of-monomials form: equal polynomials get the same Z3 term.

    Terms are hash-consed, so a term met again (the same pre-activation on the reference and
    on every rank) is looked up instead of simplified again."""
    if not isinstance(term, z3.ExprRef):
        return term
    key = term.get_id()
    known = _NORMAL_FORMS.get(key)
    if known is not None and known[0].ctx is term.ctx and same_term(known[0], term):
        return known[1]
    if len(_NORMAL_FORMS) > 200_000:
        _NORMAL_FORMS.clear()
    result = z3.simplify(term, som=True)
    _NORMAL_FORMS[key] = (term, result)
    return result


def apply_decl(function: z3.FuncDeclRef, args: list) -> z3.ExprRef:
    """``function(*args)`` through the C API: z3py's __call__ re-checks sorts on every call,
    which dominated the run time of row-wise ops."""
    array = (z3.Ast * len(args))(*[a.as_ast() for a in args])
    return _to_expr_ref(z3.Z3_mk_app(function.ctx.ref(), function.ast, len(args), array), function.ctx)


def _raw(name: str):
    """The C entry point behind a z3core wrapper (which re-checks the error state per call)."""
    return getattr(z3.z3core, name).__defaults__[-1].f


_MK_MUL, _MK_ADD, _MK_CONST = _raw("Z3_mk_mul"), _raw("Z3_mk_add"), _raw("Z3_mk_const")
_INC_REF, _DEC_REF, _SYMBOL = _raw("Z3_inc_ref"), _raw("Z3_dec_ref"), _raw("Z3_mk_string_symbol")


_MK_ITE, _GET_SORT, _SORT_KIND = _raw("Z3_mk_ite"), _raw("Z3_get_sort"), _raw("Z3_get_sort_kind")
_WRAPPERS = {z3.Z3_INT_SORT: z3.ArithRef, z3.Z3_REAL_SORT: z3.ArithRef, z3.Z3_BOOL_SORT: z3.BoolRef}


def _ite(condition: z3.BoolRef, then: z3.ExprRef, otherwise: z3.ExprRef) -> z3.ExprRef:
    """``If(condition, then, otherwise)``; through the C API when both branches are numbers or
    truth values (z3py's ``If`` coerces sorts on every call, which dominated masked lookups)."""
    if not (isinstance(then, z3.ExprRef) and isinstance(otherwise, z3.ExprRef)):
        return z3.If(condition, then, otherwise)
    ctx = then.ctx
    ref = ctx.ref()
    kinds = _SORT_KIND(ref, _GET_SORT(ref, then.as_ast())), _SORT_KIND(ref, _GET_SORT(ref, otherwise.as_ast()))
    if kinds == (z3.Z3_INT_SORT, z3.Z3_REAL_SORT):
        then, kinds = z3.ToReal(then), (z3.Z3_REAL_SORT, z3.Z3_REAL_SORT)
    elif kinds == (z3.Z3_REAL_SORT, z3.Z3_INT_SORT):
        otherwise, kinds = z3.ToReal(otherwise), (z3.Z3_REAL_SORT, z3.Z3_REAL_SORT)
    if kinds[0] != kinds[1] or kinds[0] not in _WRAPPERS:
        return z3.If(condition, then, otherwise)
    return _WRAPPERS[kinds[0]](_MK_ITE(ref, condition.as_ast(), then.as_ast(), otherwise.as_ast()), ctx)


def _sum_of_products(lefts: list, rights: list) -> Any:
    """sum_k lefts[k] * rights[k] as one n-ary Z3 term, built through the C API.

    Intermediate products are raw ASTs kept alive with explicit reference counts; only the
    sum is wrapped (as an ArithRef: both sides are Real, so no sort dispatch is needed).
    Arguments are valid terms of one context, so the skipped error checks cannot fire."""
    ctx = lefts[0].ctx
    ref = ctx.ref()
    products = []
    for a, b in zip(lefts, rights):
        product = _MK_MUL(ref, 2, (z3.Ast * 2)(a.as_ast(), b.as_ast()))
        _INC_REF(ref, product)
        products.append(product)
    if len(products) == 1:
        result = z3.ArithRef(products[0], ctx)
    else:
        result = z3.ArithRef(_MK_ADD(ref, len(products), (z3.Ast * len(products))(*products)), ctx)
    for product in products:
        _DEC_REF(ref, product)
    return result


def fresh_constants(names: list[str], sort: z3.SortRef) -> list:
    """Many named constants of one sort, without z3py's per-call checks."""
    ctx = sort.ctx
    ref = ctx.ref()
    wrap = z3.ArithRef if sort.kind() in (z3.Z3_REAL_SORT, z3.Z3_INT_SORT) else z3.BoolRef
    return [wrap(_MK_CONST(ref, _SYMBOL(ref, name.encode()), sort.ast), ctx) for name in names]


_AST_KIND, _TO_APP, _NUM_ARGS = _raw("Z3_get_ast_kind"), _raw("Z3_to_app"), _raw("Z3_get_app_num_args")


def all_constants(terms) -> bool:
    """Whether every item is a Z3 term without arguments (a variable or a number)."""
    for term in terms:
        if not isinstance(term, z3.ExprRef):
            return False
        ref, ast = term.ctx.ref(), term.as_ast()
        if _AST_KIND(ref, ast) != z3.Z3_APP_AST or _NUM_ARGS(ref, _TO_APP(ref, ast)):
            return False
    return True


def fresh_array(prefix: str, shape: tuple[int, ...], sort: z3.SortRef) -> np.ndarray:
    """An object array of new constants of one sort, element ``(i, j)`` named ``prefix[i,j]``."""
    indices = list(np.ndindex(*shape))
    array = np.empty(shape, dtype=object)
    for index, term in zip(indices, fresh_constants([f"{prefix}[{','.join(map(str, i))}]" for i in indices], sort)):
        array[index] = term
    return array


def is_zero(term: Any) -> bool:
    """Is ``term`` the number zero?"""
    return z3.is_rational_value(term) and term.numerator_as_long() == 0


def rebuilt(term: z3.ExprRef, rebuild: Callable[[z3.ExprRef, list], z3.ExprRef | None]) -> z3.ExprRef:
    """``term`` rebuilt from its leaves up, each shared subterm once: ``rebuild(node, children)``
    gives a node's replacement from its rebuilt children (None: the node over those children)."""
    done: dict[int, z3.ExprRef] = {}

    def walk(node: z3.ExprRef) -> z3.ExprRef:
        key = node.get_id()
        if key in done:
            return done[key]
        if not z3.is_app(node) or node.num_args() == 0:
            result = node
        else:
            children = [walk(child) for child in node.children()]
            result = rebuild(node, children)
            if result is None:
                same = all(a.eq(b) for a, b in zip(children, node.children()))
                result = node if same else node.decl()(*children)
        done[key] = result
        return result

    return walk(term)


def same_term(a: Any, b: Any) -> bool:
    """Z3 hash-conses terms: structurally equal terms are the same node."""
    return a.as_ast().value == b.as_ast().value


def _to_bool(term):
    """Numbers in boolean position (a float mask) become comparisons with zero."""
    if isinstance(term, z3.BoolRef):
        return term
    if isinstance(term, (bool, np.bool_)):
        return z3.BoolVal(bool(term))
    return term != 0


def _is_int_term(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) or \
        isinstance(value, z3.ArithRef) and value.is_int()


def _truncate(value):
    """float -> int toward zero; ints stay, bools become 0/1."""
    term = as_term(value)
    if isinstance(term, z3.BoolRef):
        return z3.If(term, z3.IntVal(1), z3.IntVal(0))
    if term.is_int():
        return term
    whole = integral_term(term)
    if whole is not None:  # an integer by construction (a sum of products of integer inputs): itself
        return whole
    return z3.If(term >= 0, z3.ToInt(term), -z3.ToInt(-term))


def integral_term(term) -> Any:
    """The Int term equal to real ``term`` when it is an integer by construction, else None."""
    return _integral(term, {}) if isinstance(term, z3.ArithRef) else None


def _integral(term, memo: dict) -> Any:
    """The Int term equal to real ``term`` when it is an integer by construction: integer
    numerals, ``ToReal`` of an Int term, and sums, differences, products and selections of
    those; None otherwise."""
    key = term.get_id()
    if key in memo:
        return memo[key]
    out = None
    if z3.is_rational_value(term):
        out = z3.IntVal(term.numerator_as_long()) if term.denominator_as_long() == 1 else None
    elif z3.is_to_real(term):
        out = term.arg(0)
    elif z3.is_add(term) or z3.is_mul(term) or z3.is_sub(term) or z3.is_app_of(term, z3.Z3_OP_UMINUS):
        parts = [_integral(child, memo) for child in term.children()]
        if all(p is not None for p in parts):
            out = z3.Sum(parts) if z3.is_add(term) else z3.Product(parts) if z3.is_mul(term) else \
                parts[0] - z3.Sum(parts[1:]) if z3.is_sub(term) else -parts[0]
    elif z3.is_app_of(term, z3.Z3_OP_ITE):
        branches = [_integral(child, memo) for child in term.children()[1:]]
        if all(b is not None for b in branches):
            out = z3.If(term.arg(0), branches[0], branches[1])
    memo[key] = out
    return out


def as_term(value, integer: bool = False):
    """A Z3 term for a term or a plain number/bool (ints stay integral unless told otherwise)."""
    if isinstance(value, z3.ExprRef):
        return value
    if isinstance(value, (bool, np.bool_)):
        return z3.BoolVal(bool(value))
    if integer or isinstance(value, (int, np.integer)):
        return z3.IntVal(int(value))
    return z3.RealVal(float(value))


_FOLDED_ON_CONSTANTS = ("sqrt", "rsqrt")  # of a positive numeral: a number (the numpy backend's function)


def rounding_function(fmt: str, kept: bool = False) -> z3.FuncDeclRef:
    """The uninterpreted rounding to ``fmt`` (``kept``: one a proof must not take as the identity)."""
    return z3.Function(f"{'rounded' if kept else 'round'}_{fmt}", z3.RealSort(), z3.RealSort())


class Z3Backend:
    """Object arrays of Z3 terms.  One instance per proof: it owns the function symbols."""

    symbolic = True

    def __init__(self) -> None:
        self._functions: dict[tuple, z3.FuncDeclRef] = {}
        self._leaves: dict[tuple[str, int], dict[int, z3.ExprRef]] = {}
        self.uninterpreted_ops: set[str] = set()
        self.fold_roundings = True  # round numerals exactly (False: leave them to the caller, as terms)

    def _function(self, name: str, arity: int, index: int = 0, result=None) -> z3.FuncDeclRef:
        key = (name, arity, index)
        if key not in self._functions:
            self._functions[key] = z3.Function(f"{name}_{arity}_{index}", *([z3.RealSort()] * arity),
                                               result or z3.RealSort())
        return self._functions[key]

    def is_int(self, array) -> bool:
        flat = np.asarray(array, dtype=object).reshape(-1)
        return bool(flat.size) and all(isinstance(t, z3.ArithRef) and t.is_int() or isinstance(t, (int, np.integer))
                                       for t in flat[:1])

    def _real(self, term):
        if isinstance(term, (int, np.integer)) and not isinstance(term, (bool, np.bool_)):
            return z3.RealVal(int(term))
        term = as_term(term)
        return z3.ToReal(term) if isinstance(term, z3.ArithRef) and term.is_int() else term

    def unary(self, name: str, x) -> np.ndarray:
        self.uninterpreted_ops.add(name)
        function = self._function(name, 1)

        def apply(term):
            term = normal_form(self._real(term))
            if name in _FOLDED_ON_CONSTANTS and z3.is_rational_value(term) and term.as_fraction() > 0:
                # sqrt(torch.tensor(dim)) in a reference: a number (as the kernel's own Python float is)
                return z3.RealVal(float(_NUMPY_UNARY[name](float(term.as_fraction()))))
            return function(term)
        return objectwise(apply, np.asarray(x, dtype=object))

    def rowwise(self, name: str, x, eps: float = 0.0, grad=None) -> np.ndarray:
        """Output j of a row is an uninterpreted function of the whole row (and the row of ``grad``)."""
        self.uninterpreted_ops.add(name)
        x = np.asarray(x, dtype=object)
        n = x.shape[-1]
        grad = None if grad is None else np.broadcast_to(np.asarray(grad, dtype=object), x.shape)
        out = np.empty(x.shape, dtype=object)
        for index in np.ndindex(*x.shape[:-1]):
            row = [normal_form(self._real(t)) for t in x[index]]
            if grad is not None:
                row += [normal_form(self._real(t)) for t in grad[index]]
            for j in range(n):
                out[index + (j,)] = apply_decl(self._function(name, len(row), j), row)
        return out

    def matmul(self, a, b) -> np.ndarray:
        """Exact matrix product with n-ary sums (batched like numpy.matmul)."""
        a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + b.shape[-2:])
        out = np.empty(batch + (a.shape[-2], b.shape[-1]), dtype=object)
        a, b = self._reals(a), self._reals(b)
        for index in np.ndindex(*batch):
            left, right = a[index], b[index]
            columns = [list(right[:, j]) for j in range(right.shape[1])]
            for i in range(left.shape[0]):
                row = list(left[i])
                for j, column in enumerate(columns):
                    out[index + (i, j)] = _sum_of_products(row, column)
        return out

    def sum_rows(self, array) -> np.ndarray:
        """The sum over the first dim, as one n-ary term per entry."""
        array = self._reals(np.asarray(array, dtype=object))
        out = np.empty(array.shape[1:], dtype=object)
        for index in np.ndindex(*array.shape[1:]):
            terms = list(array[(slice(None),) + index])
            out[index] = z3.Sum(*terms) if len(terms) > 1 else terms[0]
        return out

    def _reals(self, array: np.ndarray) -> np.ndarray:
        """Make every entry a Real term; checked once per array since ints are rare here."""
        flat = array.reshape(-1)
        if flat.size and all(isinstance(t, z3.ArithRef) and not t.is_int() for t in (flat[0], flat[-1])):
            return array
        return objectwise(self._real, array)

    def maximum(self, a, b):
        return objectwise(lambda p, q: self._extremum("max", (p, q)), a, b)

    def maximum_of(self, parts: list):
        """The elementwise maximum of all ``parts`` at once: one If-chain per element, where folding
        ``maximum`` over a row built a chain per step (quadratic in the row's length)."""
        if len(parts) == 1:
            return parts[0]
        stacked = np.stack(np.broadcast_arrays(*[np.asarray(p, dtype=object) for p in parts]))
        out = np.empty(stacked.shape[1:], dtype=object)
        for index in np.ndindex(out.shape):
            out[index] = self._extremum("max", stacked[(slice(None),) + index])
        return out

    def minimum(self, a, b):
        return objectwise(lambda p, q: self._extremum("min", (p, q)), a, b)

    def _extremum(self, kind: str, operands):
        """max/min as one canonical term per *set* of operands.

        A max over a row and the max of per-rank maxes are the same number; built naively
        they are different If-trees, and every op that reads them (exp(x - max) in a stable
        softmax) then needs case splits to see they agree.  Flattening nested extrema into a
        leaf set and building one running If-chain over the sorted leaves makes them the
        same hash-consed term."""
        leaves: dict = {}
        for operand in map(as_term, operands):
            leaves |= self._leaves.get((kind, operand.get_id()), {operand.get_id(): operand})
        ordered = [leaves[key] for key in sorted(leaves)]
        term = ordered[0]
        for leaf in ordered[1:]:
            term = _ite(leaf >= term, leaf, term) if kind == "max" else _ite(leaf <= term, leaf, term)
        self._leaves[(kind, term.get_id())] = leaves
        return term

    def divide(self, a, b):
        """True division, as ``/`` on tensors (integers too: Z3's ``/`` on Int terms would be
        integer division), with the divisor in normal form so equal sums divide alike."""
        return _elementwise(lambda p, q: self._real(p) / normal_form(self._real(q)), a, b)

    def floordiv(self, a, b):
        """``a // b``: the floor of the true quotient (Python's and torch's rule); an int for ints."""
        return _elementwise(self._floordiv, a, b)

    def _floordiv(self, p, q):
        floor = z3.ToInt(self._real(p) / normal_form(self._real(q)))
        return floor if _is_int_term(p) and _is_int_term(q) else z3.ToReal(floor)

    def mod(self, a, b):
        """``a % b = a - b * (a // b)``: the result takes the sign of the divisor."""
        return _elementwise(lambda p, q: as_term(p) - as_term(q) * self._floordiv(p, q), a, b)

    def where(self, cond, a, b):
        return objectwise(lambda c, p, q: _ite(_to_bool(as_term(c)), as_term(p), as_term(q)), cond, a, b)

    def compare(self, op: str, a, b):
        functions = {"lt": lambda p, q: p < q, "le": lambda p, q: p <= q, "gt": lambda p, q: p > q,
                     "ge": lambda p, q: p >= q, "eq": lambda p, q: p == q, "ne": lambda p, q: p != q}
        return objectwise(lambda p, q: functions[op](as_term(p), as_term(q)), a, b)

    def logical(self, op: str, a, b=None):
        if op == "not":
            return objectwise(lambda p: z3.Not(_to_bool(as_term(p))), a)
        combine = z3.And if op == "and" else z3.Or
        return objectwise(lambda p, q: combine(_to_bool(as_term(p)), _to_bool(as_term(q))), a, b)

    def take_rows(self, table, ids) -> np.ndarray:
        """Row lookup with symbolic ids: an exact If-chain; out of range is an unknown row."""
        table = np.asarray(table, dtype=object)
        ids = np.asarray(ids, dtype=object)
        rows = table.shape[0]
        out = np.empty(ids.shape + table.shape[1:], dtype=object)
        cells = [[as_term(table[(r,) + col]) for r in range(rows)] for col in np.ndindex(*table.shape[1:])]
        for index in np.ndindex(*ids.shape):
            key = as_term(ids[index], integer=True)
            conditions = [key == r for r in range(rows)]  # shared by every column of the row
            missing = self._function("out_of_range_row", 1)(z3.ToReal(key))
            for col, column in zip(np.ndindex(*table.shape[1:]), cells):
                term = missing
                for condition, cell in zip(reversed(conditions), reversed(column)):
                    term = _ite(condition, cell, term)
                out[index + col] = term
        return out

    def pick(self, rows, index) -> np.ndarray:
        rows = np.asarray(rows, dtype=object)
        index = np.asarray(index, dtype=object)
        out = np.empty(index.shape, dtype=object)
        for position in np.ndindex(*index.shape):
            key = as_term(index[position], integer=True)
            term = self._function("out_of_range_class", 1)(z3.ToReal(key))
            for c in reversed(range(rows.shape[-1])):
                term = _ite(key == c, as_term(rows[position + (c,)]), term)
            out[position] = term
        return out

    def zeros(self, shape, dtype: str = "f32"):
        return self.full(shape, 0, dtype)

    def full(self, shape, value, dtype: str = "f32"):
        out = np.empty(tuple(shape), dtype=object)
        out.fill(as_term(value, integer=dtype.startswith("i")))
        return out

    def rounded(self, x, fmt: str):
        """Rounding to a narrow float format (``verifier.rules.casts.round_value``): exact on
        numerals (unless ``fold_roundings`` is off), the uninterpreted ``round_<fmt>`` on any
        other term."""
        from .rules.casts import round_value

        def apply(term):
            term = self._real(term)
            if not self.fold_roundings:  # the caller may take the rounding away: the term as it came
                return rounding_function(fmt)(term)
            term = normal_form(term)
            if z3.is_rational_value(term):
                value = round_value(term.as_fraction(), fmt)
                if math.isfinite(value):
                    return z3.RealVal(Fraction(value))
            return rounding_function(fmt)(term)
        return objectwise(apply, np.asarray(x, dtype=object))

    def cast(self, x, dtype: str):
        """Casts keep the exact real value (exact arithmetic, not float rounding), except that
        float -> int truncates toward zero as in torch and NumPy (Z3's ``ToInt`` floors)."""
        if dtype.startswith("i"):
            return objectwise(_truncate, x)
        if dtype == "bool":
            return objectwise(lambda t: _to_bool(as_term(t)), x)
        return objectwise(lambda t: z3.If(t, z3.RealVal(1), z3.RealVal(0)) if isinstance(as_term(t), z3.BoolRef)
                           else self._real(t), x)

