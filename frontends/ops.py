"""Emitting IR ops for torch operations: local shapes, dtypes, scalars, views, in-place updates.

``Emitter`` is mixed into the interpreter; the idiom tables (``torch_ops.py``,
``explicit.py``, ``megatron.py``, ``dtensor.py``) call its methods.  Shapes are *local*
shapes as sympy expressions; an attribute that holds a size is written as an IR dim
expression, and a size that depends on the mesh is written ``-1`` in a reshape (so that the
same IR is right on a mesh of size 1) or is unsupported elsewhere.
"""
from __future__ import annotations

from typing import Any, Sequence

import sympy as sp

from verifier.placements import Partial, Replicate, Shard

from .sizes import to_sym
from .builder import Builder
from .symbolic import Dims, ShapeMismatch, _integer_polynomial
from .values import Tensor, UnsupportedError

FLOATS = ("f64", "f32", "bf16", "f16")
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
LINEAR_IN_PARTIAL = {"neg", "identity", "cast"}


def is_one(size) -> bool:
    return isinstance(size, (int, sp.Integer)) and int(size) == 1


class Emitter:
    builder: Builder
    dims: Dims

    # -- reading values -----------------------------------------------------------------
    def use(self, t: Tensor, line: int | None) -> str:
        if t.stale:
            raise UnsupportedError(line, "read of a view", t.stale)
        if t.pending is not None and t.name is None:
            pending = t.pending
            if pending.fixed_dim is None:
                pending.fix(0)
            if pending.fixed_dim != 0:
                raise UnsupportedError(line, "all_gather buffer", "the buffer is read both as stacked along dim 0 "
                                                                  "and re-assembled along another dim")
            result = pending.result
            t.name, t.shape, t.dtype = result.name, result.shape, result.dtype
            t.pending = None
        if t.name is None:
            if t.lazy is not None:
                make, t.lazy = t.lazy, None
                make()
            else:
                raise UnsupportedError(line, t.origin or "torch.empty", "reads a buffer that no op has written")
        return t.name

    def op(self, kind: str, args: Sequence[Tensor], attrs: dict[str, Any], shape: Sequence, dtype: str,
           line: int | None, *, dt: tuple | None = None, dt_mesh=None, unconditional: bool = False) -> Tensor:
        names = [self.use(a, line) for a in args]
        (result,), _ = self.builder.emit(kind, names, attrs, line, unconditional=unconditional)
        out = Tensor(result, tuple(to_sym(s) for s in shape), dtype)
        if dt is not None:
            out.dt, out.dt_mesh = dt, dt_mesh
        return out

    def op_multi(self, kind: str, args: Sequence[Tensor], attrs: dict[str, Any], shapes: list, dtype: str,
                 line: int | None, *, dt: tuple | None = None, dt_mesh=None) -> list[Tensor]:
        names = [self.use(a, line) for a in args]
        results, _ = self.builder.emit(kind, names, attrs, line, results=len(shapes))
        outs = []
        for name, shape in zip(results, shapes):
            out = Tensor(name, tuple(to_sym(s) for s in shape), dtype)
            if dt is not None:
                out.dt, out.dt_mesh = dt, dt_mesh
            outs.append(out)
        return outs

    # -- views and in-place updates -----------------------------------------------------
    def as_view(self, result: Tensor, base: Tensor) -> Tensor:
        if base.storage is None:
            base.storage = [base]
        result.storage = base.storage
        base.storage.append(result)
        return result

    def mutate(self, target: Tensor, value: Tensor, line: int | None, what: str) -> Tensor:
        """``target`` now holds ``value`` (an in-place op): aliases see it, views go stale."""
        for other in target.storage or ():
            if other is not target:
                other.stale = (f"this view shares memory with a tensor that {what} (line {line}) changed in place; "
                               f"views of in-place updated tensors are not modelled")
        target.storage = [target]
        if target.name is not None and target.name not in self.builder.temps:
            self.builder.name_result(value, _base_name(target.name))
        target.name, target.shape, target.dtype = value.name, value.shape, value.dtype
        target.pending, target.lazy = None, None
        target.dt, target.dt_mesh = value.dt, value.dt_mesh
        return target

    # -- sizes --------------------------------------------------------------------------
    def unify(self, a, b, what: str, line: int | None) -> None:
        try:
            self.dims.unify(a, b, what)
        except ShapeMismatch as problem:
            if not problem.concrete:
                raise UnsupportedError(line, what, f"sizes do not fit: {problem}") from None
            # A real shape error of the program on this mesh: emit the op anyway, the verifier reports it.
            self.note(f"line {line}: sizes do not fit ({problem}); the program fails on the mesh "
                      f"{self.dims.mesh}")

    def divisible(self, a, b, what: str, line: int | None) -> None:
        try:
            self.dims.divisible(a, b)
        except ShapeMismatch as problem:
            raise UnsupportedError(line, what, f"{problem}") from None

    def as_int(self, value, line: int | None, what: str) -> int:
        """A Python-level integer the IR needs as a plain number."""
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return value
        if isinstance(value, sp.Basic):
            if self.dims.depends_on_mesh(value):
                raise UnsupportedError(line, what, f"{self.describe(value)} depends on the rank or world size, "
                                                   f"which the IR cannot express here")
            result = self.dims.pin(value)
            if isinstance(result, int):
                return result
        raise UnsupportedError(line, what, f"expected an integer, got {value!r}")

    def norm_dim(self, dim, ndim: int, line: int | None) -> int:
        d = self.as_int(dim, line, "dim")
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise UnsupportedError(line, "dim", f"dim {d} is out of range for a {ndim}-d tensor")
        return d % ndim if ndim else 0

    def attr_dim(self, size, line: int | None, what: str):
        """A size as an attribute value (int or IR dim expression)."""
        if self.dims.depends_on_mesh(size):
            raise UnsupportedError(line, what, f"size {self.describe(size)} depends on the world size")
        return self.dims.dim(size)

    def mesh_size_dim(self, size, line: int | None, what: str) -> str:
        """A size over mesh sizes as an IR expression using ``<mesh dim>_size``."""
        names = {self.dims.size[name]: f"{name}_size" for name in self.dims.mesh.names}
        size = to_sym(size)
        numerator, denominator = sp.fraction(sp.together(size))
        self.divisible(numerator.subs(self.dims.mesh_values), denominator.subs(self.dims.mesh_values), what, line)
        try:
            return self.dims.format(size, names=names)
        except ValueError:
            raise UnsupportedError(line, what, f"size {self.describe(size)} cannot be written in the IR") from None

    def describe(self, value) -> str:
        if isinstance(value, sp.Basic):
            names = {}
            for name in self.dims.mesh.names:
                names[self.dims.rank[name]] = "rank" if len(self.dims.mesh.names) == 1 else f"rank[{name}]"
                names[self.dims.size[name]] = "world" if len(self.dims.mesh.names) == 1 else f"size[{name}]"
            try:
                return self.dims.format(value, names=names)
            except ValueError:
                return str(value)
        return repr(value)

    def broadcast(self, shapes: Sequence[Sequence], line: int | None) -> tuple:
        ndim = max((len(s) for s in shapes), default=0)
        out = []
        for i in range(1, ndim + 1):
            sizes = [s[-i] for s in shapes if len(s) >= i]
            wide = [s for s in sizes if not is_one(s)]
            if not wide:
                out.append(sp.Integer(1))
                continue
            for other in wide[1:]:
                self.unify(wide[0], other, "broadcast", line)
            out.append(to_sym(wide[0]))
        return tuple(reversed(out))

    # -- dtypes -------------------------------------------------------------------------
    @staticmethod
    def promote(*dtypes: str) -> str:
        for dtype in dtypes:
            if dtype in FLOATS:
                return dtype
        if all(d == "bool" for d in dtypes):
            return "bool"
        return "i64" if "i64" in dtypes else next((d for d in dtypes if d != "bool"), "i64")

    # -- scalars ------------------------------------------------------------------------
    def is_scalar(self, value) -> bool:
        return isinstance(value, (bool, int, float)) or isinstance(value, sp.Basic)

    def scalar_attr(self, value, line: int | None):
        """A Python number (free of rank/world) as an attribute value."""
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)):
            return value
        value = to_sym(value)
        if value.is_Integer:
            return int(value)
        if value.is_number:
            return float(value)
        if _integer_polynomial(value) and self.dims.printable(value):
            return self.dims.format(value)
        concrete = self.dims.concrete(value)
        return concrete

    def scalar_tensor(self, value, line: int | None) -> Tensor:
        """A 0-d tensor holding a Python number that depends on the rank or world size."""
        cache = self.__dict__.setdefault("_scalar_cache", {})
        value = to_sym(value)
        key = sp.srepr(value)
        if key in cache:
            return cache[key]
        result = self._scalar_ops(value, line)
        cache[key] = result
        return result

    def _scalar_ops(self, value, line: int | None) -> Tensor:
        if value.is_Integer:
            return self.op("const", [], {"value": int(value), "dtype": "i64"}, (), "i64", line, unconditional=True)
        if value.is_number:
            return self.op("const", [], {"value": float(value), "dtype": "f32"}, (), "f32", line,
                           unconditional=True)
        for name in self.dims.mesh.names:
            if value == self.dims.rank[name]:
                return self.op("rank", [], {"mesh_dim": name}, (), "i64", line, unconditional=True)
            if value == self.dims.size[name]:
                return self.op("world_size", [], {"mesh_dim": name}, (), "i64", line, unconditional=True)
        if isinstance(value, sp.Symbol) and value in self.dims.values:
            return self.op("const", [], {"value": str(value), "dtype": "i64"}, (), "i64", line, unconditional=True)
        if not self.dims.depends_on_rank(value) and self._integral(value):
            # a size over the mesh sizes, e.g. VOCAB // world: one const, `tp_size` is resolved per mesh
            names = {self.dims.size[name]: f"{name}_size" for name in self.dims.mesh.names}
            try:
                text = self.dims.format(value, names=names)
            except ValueError:
                text = None
            if text is not None:
                return self.op("const", [], {"value": text, "dtype": "i64"}, (), "i64", line, unconditional=True)
        if isinstance(value, sp.Add):
            terms = list(sp.Add.make_args(value))
            acc = self.scalar_tensor(terms[0], line)
            for term in terms[1:]:
                if term.could_extract_minus_sign():
                    acc = self._scalar_binary("sub", acc, self.scalar_tensor(-term, line), line)
                else:
                    acc = self._scalar_binary("add", acc, self.scalar_tensor(term, line), line)
            return acc
        if isinstance(value, sp.Mul) and self.dims.depends_on_rank(value):
            ranked = sp.Mul(*[f for f in sp.Mul.make_args(value) if self.dims.depends_on_rank(f)])
            rest = sp.cancel(value / ranked)
            if rest != 1 and not self.dims.depends_on_rank(rest) and self._integral(rest):
                return self._scalar_binary("mul", self.scalar_tensor(ranked, line), self.scalar_tensor(rest, line),
                                           line)
        if isinstance(value, sp.Mul):
            numerator, denominator = sp.fraction(value)
            if denominator != 1:
                top = self.scalar_tensor(numerator, line)
                bottom = self.scalar_tensor(denominator, line)
                quotient = self._scalar_binary("div", top, bottom, line)
                if top.dtype == "i64" and bottom.dtype == "i64" and self._integral(value):
                    quotient = self.op("cast", [quotient], {"dtype": "i64"}, (), "i64", line, unconditional=True)
                return quotient
            factors = list(sp.Mul.make_args(value))
            acc = self.scalar_tensor(factors[0], line)
            for factor in factors[1:]:
                acc = self._scalar_binary("mul", acc, self.scalar_tensor(factor, line), line)
            return acc
        if isinstance(value, sp.Pow) and value.args[1].is_Integer and value.args[1] > 0:
            base = self.scalar_tensor(value.args[0], line)
            acc = base
            for _ in range(int(value.args[1]) - 1):
                acc = self._scalar_binary("mul", acc, base, line)
            return acc
        raise UnsupportedError(line, "scalar", f"{self.describe(value)} depends on the rank or world size in a way "
                                               f"the IR cannot compute (only + - * / are modelled)")

    def _integral(self, value) -> bool:
        """Is ``value`` an integer for the file's sizes whatever the rank (Python ``//`` semantics)?"""
        from .symbolic import _integer_polynomial
        concrete = to_sym(value).subs(self.dims.values).subs(self.dims.mesh_values)
        return _integer_polynomial(sp.expand(concrete))

    def _scalar_binary(self, kind: str, a: Tensor, b: Tensor, line: int | None) -> Tensor:
        dtype = "f32" if kind == "div" else self.promote(a.dtype, b.dtype)
        return self.op(kind, [a, b], {}, (), dtype, line, unconditional=True)

    def const_tensor(self, value, line: int | None, dtype: str | None = None) -> Tensor:
        if self.dims.depends_on_mesh(value):
            return self.scalar_tensor(value, line)
        attr = self.scalar_attr(value, line)
        if dtype is None:
            dtype = "bool" if isinstance(attr, bool) else "i64" if isinstance(attr, (int, str)) else "f32"
        return self.op("const", [], {"value": attr, "dtype": dtype}, (), dtype, line, unconditional=True)

    # -- element-wise -------------------------------------------------------------------
    def unary(self, kind: str, x: Tensor, line: int | None, attrs: dict | None = None) -> Tensor:
        dtype = x.dtype if kind in ("neg", "abs", "relu", "identity") else (
            x.dtype if x.dtype in FLOATS else "f32")
        if kind == "logical_not":
            dtype = "bool"
        (x,), dt = self.dtensor_pointwise(kind, [x], line)
        return self.op(kind, [x], attrs or {}, x.shape, dtype, line, dt=dt, dt_mesh=x.dt_mesh)

    def binary(self, kind: str, a, b, line: int | None) -> Tensor:
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            shape = self.broadcast([a.shape, b.shape], line)
            dtype = self._binary_dtype(kind, a.dtype, b.dtype)
            (a, b), dt = self.dtensor_pointwise(kind, [a, b], line)
            return self.op(kind, [a, b], {}, shape, dtype, line, dt=dt, dt_mesh=a.dt_mesh or b.dt_mesh)
        tensor, scalar, scalar_left = (a, b, False) if isinstance(a, Tensor) else (b, a, True)
        if not self.is_scalar(scalar):
            raise UnsupportedError(line, kind, f"operand {scalar!r} is neither a tensor nor a number")
        if self.dims.depends_on_mesh(scalar):
            other = self.scalar_tensor(scalar, line)
            return self.binary(kind, other, tensor, line) if scalar_left else self.binary(kind, tensor, other, line)
        attrs: dict[str, Any] = {"scalar": self.scalar_attr(scalar, line)}
        if scalar_left:
            if kind in ("sub", "div", "floordiv", "mod"):
                attrs["reverse"] = True
            elif kind in COMPARISONS:
                kind = FLIPPED[kind]
            elif kind == "pow":
                raise UnsupportedError(line, "pow", "a number raised to a tensor power is not modelled")
        scalar_dtype = "f32" if isinstance(attrs["scalar"], float) else "bool" if isinstance(attrs["scalar"], bool) \
            else "i64"
        dtype = self._binary_dtype(kind, tensor.dtype, scalar_dtype, scalar=True)
        (tensor,), dt = self.dtensor_pointwise(kind, [tensor], line, scalar=True)
        return self.op(kind, [tensor], attrs, tensor.shape, dtype, line, dt=dt, dt_mesh=tensor.dt_mesh)

    def _binary_dtype(self, kind: str, a: str, b: str, scalar: bool = False) -> str:
        if kind in COMPARISONS or kind in ("logical_and", "logical_or"):
            return "bool"
        if kind == "div":
            return a if a in FLOATS else (b if b in FLOATS else "f32")
        if scalar and a in FLOATS:
            return a
        return self.promote(a, b)

    # -- DTensor placement propagation (kept deliberately small) -----------------------------
    def dtensor_pointwise(self, kind: str, operands: Sequence[Tensor], line: int | None,
                          scalar: bool = False) -> tuple[list[Tensor], tuple | None]:
        """DTensor's rule for element-wise ops: equal placements pass through; a Partial operand of an
        op that is not linear in it is reduced first (DTensor redistributes it to Replicate)."""
        operands = list(operands)
        placed = [t for t in operands if t.dt is not None]
        if not placed:
            return operands, None
        if len(placed) != len(operands) and any(t.ndim for t in operands if t.dt is None):
            raise UnsupportedError(line, kind, "mixes a DTensor with a plain (local) tensor; call .to_local() or "
                                               "DTensor.from_local first")
        first = placed[0].dt
        if any(t.dt != first for t in placed[1:]):
            raise UnsupportedError(line, kind, "combines DTensors with different placements (implicit "
                                               "redistribution between shardings is not modelled)")
        if any(isinstance(p, Partial) for p in first):
            linear = kind in LINEAR_IN_PARTIAL or (kind in ("mul", "div") and scalar) or \
                (kind in ("add", "sub") and len(placed) == 2)
            if not linear:
                target = tuple(Replicate() if isinstance(p, Partial) else p for p in first)
                operands = [self.implicit_redistribute(t, target, line) if t.dt is not None else t
                            for t in operands]
                first = target
        return operands, first

    def implicit_redistribute(self, t: Tensor, target: tuple, line: int | None) -> Tensor:
        """The redistribution DTensor's operator dispatch inserts on its own."""
        from .dtensor import redistribute
        from .library import Call
        return redistribute(Call(self, line, None), t, target, line)

    def dtensor_guard(self, kind: str, operands: Sequence[Tensor], line: int | None) -> None:
        """Ops without a DTensor rule here: only plain tensors are accepted."""
        if any(t.dt is not None for t in operands):
            raise UnsupportedError(line, kind, "this op on a DTensor is not modelled (DTensor sharding "
                                               "propagation); use .to_local() / .full_tensor() explicitly")

    # -- shapes -------------------------------------------------------------------------
    def numel(self, shape: Sequence) -> sp.Expr:
        return sp.Mul(*[to_sym(s) for s in shape]) if shape else sp.Integer(1)

    def reshape(self, x: Tensor, target: Sequence, line: int | None, what: str = "reshape") -> Tensor:
        """``x.view(*target)``: ``-1`` allowed once; mesh-dependent sizes are written -1."""
        target = [to_sym(t) for t in target]
        total = self.numel(x.shape)
        holes = [i for i, t in enumerate(target) if t == -1]
        if len(holes) > 1:
            raise UnsupportedError(line, what, "more than one -1 in the target shape")
        if holes:
            known = self.numel([t for i, t in enumerate(target) if i != holes[0]])
            self.divisible(total, known, what, line)
            target[holes[0]] = sp.cancel(total / known)
        else:
            self.unify(total, self.numel(target), what, line)
        attr = []
        mesh_dependent = [i for i, t in enumerate(target) if self.dims.depends_on_mesh(t)]
        for i in mesh_dependent:
            if self.dims.depends_on_rank(target[i]):
                raise UnsupportedError(line, what, f"size {self.describe(target[i])} depends on the rank")
        for i, size in enumerate(target):
            if i in mesh_dependent and len(mesh_dependent) == 1 or (not mesh_dependent and i in holes):
                attr.append(-1)
            elif i in mesh_dependent:
                # several sizes depend on the world size: write them over `<mesh dim>_size`
                attr.append(self.mesh_size_dim(size, line, what))
            else:
                attr.append(self.dims.dim(size))
        self.dtensor_guard(what, [x], line)
        return self.as_view(self.op("reshape", [x], {"shape": attr}, target, x.dtype, line), x)

    def transpose(self, x: Tensor, d0, d1, line: int | None) -> Tensor:
        a, b = self.norm_dim(d0, x.ndim, line), self.norm_dim(d1, x.ndim, line)
        shape = list(x.shape)
        shape[a], shape[b] = shape[b], shape[a]
        dt = self._permuted_dt(x, self._swap(x.ndim, a, b), line)
        return self.as_view(self.op("transpose", [x], {"dim0": a, "dim1": b}, shape, x.dtype, line, dt=dt,
                                    dt_mesh=x.dt_mesh), x)

    @staticmethod
    def _swap(ndim: int, a: int, b: int) -> list[int]:
        perm = list(range(ndim))
        perm[a], perm[b] = perm[b], perm[a]
        return perm

    def permute(self, x: Tensor, order: Sequence, line: int | None) -> Tensor:
        perm = [self.norm_dim(d, x.ndim, line) for d in order]
        if sorted(perm) != list(range(x.ndim)):
            raise UnsupportedError(line, "permute", f"{perm} is not a permutation of {x.ndim} dims")
        dt = self._permuted_dt(x, perm, line)
        return self.as_view(self.op("permute", [x], {"dims": perm}, [x.shape[p] for p in perm], x.dtype, line, dt=dt,
                                    dt_mesh=x.dt_mesh), x)

    def _permuted_dt(self, x: Tensor, perm: list[int], line: int | None):
        if x.dt is None:
            return None
        return tuple(Shard(perm.index(p.dim % x.ndim)) if isinstance(p, Shard) else p for p in x.dt)

    def slice(self, x: Tensor, dim: int, start, end, line: int | None) -> Tensor:
        size = x.shape[dim]
        start = sp.Integer(0) if start is None else to_sym(start)
        end = size if end is None else to_sym(end)
        for bound in (start, end):
            if self.dims.depends_on_mesh(bound):
                raise UnsupportedError(line, "slice", f"bound {self.describe(bound)} depends on the rank or world "
                                                      f"size but is not this rank's 1/world block of the dim")
        real_start = start + size if start.is_number and start < 0 else start
        real_end = end + size if end.is_number and end < 0 else end
        if real_end.is_number and size.is_number and real_end > size:
            real_end = size  # python slices clamp
        length = real_end - real_start
        attrs = {"dim": dim}
        if start != 0:
            attrs["start"] = self.dims.dim(start) if not (start.is_number and start < 0) else int(start)
        if end != size:
            attrs["end"] = self.dims.dim(end) if not (end.is_number and end < 0) else int(end)
        shape = list(x.shape)
        shape[dim] = to_sym(length)
        self.dtensor_guard("slice", [x], line)
        return self.as_view(self.op("slice", [x], attrs, shape, x.dtype, line), x)

    def local_chunk(self, x: Tensor, dim: int, mesh_dims: Sequence[str], line: int | None,
                    grad: str | None = None) -> Tensor:
        """This rank's block of ``dim``, over one or several mesh dims (major first)."""
        self.dtensor_guard("local_chunk", [x], line)
        out = x
        for mesh_dim in mesh_dims:
            size = out.shape[dim]
            self.divisible(size, self.dims.size[mesh_dim], "local_chunk", line)
            shape = list(out.shape)
            shape[dim] = sp.cancel(size / self.dims.size[mesh_dim])
            attrs = {"mesh_dim": mesh_dim, "dim": dim, **({"grad": grad} if grad else {})}
            out = self.op("local_chunk", [out], attrs, shape, out.dtype, line)
        return self.as_view(out, x) if out is not x else out

    def cat(self, tensors: Sequence[Tensor], dim, line: int | None) -> Tensor:
        if not tensors:
            raise UnsupportedError(line, "torch.cat", "of an empty list")
        ndim = tensors[0].ndim
        d = self.norm_dim(dim, ndim, line)
        total = sp.Integer(0)
        for t in tensors:
            if t.ndim != ndim:
                raise UnsupportedError(line, "torch.cat", "tensors of different ranks")
            for i in range(ndim):
                if i != d:
                    self.unify(tensors[0].shape[i], t.shape[i], "torch.cat", line)
            total += t.shape[d]
        shape = list(tensors[0].shape)
        shape[d] = sp.expand(total)
        self.dtensor_guard("torch.cat", tensors, line)
        dtype = self.promote(*[t.dtype for t in tensors])
        return self.op("cat", list(tensors), {"dim": d}, shape, dtype, line)

    def chunk(self, x: Tensor, count: int, dim: int, line: int | None) -> list[Tensor]:
        size = x.shape[dim]
        self.divisible(size, count, "chunk", line)
        piece = sp.cancel(size / count)
        shape = list(x.shape)
        shape[dim] = piece
        self.dtensor_guard("chunk", [x], line)
        outs = self.op_multi("chunk", [x], {"chunks": count, "dim": dim}, [shape] * count, x.dtype, line)
        return [self.as_view(o, x) for o in outs]

    def split(self, x: Tensor, sizes: Sequence, dim: int, line: int | None) -> list[Tensor]:
        self.unify(sp.Add(*[to_sym(s) for s in sizes]), x.shape[dim], "split", line)
        shapes = []
        for s in sizes:
            shape = list(x.shape)
            shape[dim] = to_sym(s)
            shapes.append(shape)
        attr = [self.attr_dim(s, line, "split") for s in sizes]
        self.dtensor_guard("split", [x], line)
        outs = self.op_multi("split", [x], {"sizes": attr, "dim": dim}, shapes, x.dtype, line)
        return [self.as_view(o, x) for o in outs]

    def reduction(self, kind: str, x: Tensor, dim, keepdim: bool, line: int | None) -> Tensor:
        if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
            reduced = list(range(x.ndim))
            attrs: dict[str, Any] = {}
        else:
            items = list(dim) if isinstance(dim, (list, tuple)) else [dim]
            reduced = sorted(self.norm_dim(d, x.ndim, line) for d in items)
            attrs = {"dim": reduced if isinstance(dim, (list, tuple)) else reduced[0]}
        if keepdim:
            attrs["keepdim"] = True
        shape = [1 if i in reduced else s for i, s in enumerate(x.shape)] if keepdim else \
            [s for i, s in enumerate(x.shape) if i not in reduced]
        dtype = x.dtype if kind == "amax" or x.dtype in FLOATS else ("f32" if kind == "mean" else "i64")
        self.dtensor_guard(kind, [x], line)
        return self.op(kind, [x], attrs, shape, dtype, line)

    def normalise(self, kind: str, x: Tensor, line: int | None, *, dim=-1, affine: Sequence[Tensor] = (),
                  eps: float | None = None) -> Tensor:
        d = self.norm_dim(dim, x.ndim, line)
        attrs: dict[str, Any] = {}
        if kind in ("softmax", "log_softmax"):
            attrs["dim"] = d if d != x.ndim - 1 else -1
        if eps is not None:
            attrs["eps"] = float(eps)
        for param in affine:
            if param.ndim != 1:
                raise UnsupportedError(line, kind, "weight/bias must be 1-d over the last dim")
            self.unify(param.shape[0], x.shape[-1], kind, line)
        dt = None
        if x.dt is not None:
            if affine:
                raise UnsupportedError(line, kind, "a DTensor input with parameters is not modelled")
            target = tuple(Replicate() if isinstance(p, Partial) or (isinstance(p, Shard) and p.dim % x.ndim == d)
                           else p for p in x.dt)
            if target != x.dt:
                x = self.implicit_redistribute(x, target, line)
            dt = x.dt
        dtype = x.dtype if x.dtype in FLOATS else "f32"
        return self.op(kind, [x, *affine], attrs, x.shape, dtype, line, dt=dt, dt_mesh=x.dt_mesh)

    def matmul(self, a: Tensor, b: Tensor, line: int | None) -> Tensor:
        if a.ndim < 2 or b.ndim < 2:
            raise UnsupportedError(line, "matmul", "matmul with a 1-d operand is not modelled (unsqueeze it)")
        self.unify(a.shape[-1], b.shape[-2], "matmul", line)
        batch = self.broadcast([a.shape[:-2], b.shape[:-2]], line)
        self.dtensor_guard("matmul", [a, b], line)
        return self.op("matmul", [a, b], {}, tuple(batch) + (a.shape[-2], b.shape[-1]),
                       self.promote(a.dtype, b.dtype), line)

    def linear(self, x: Tensor, w: Tensor, b: Tensor | None, line: int | None) -> Tensor:
        if w.ndim != 2:
            raise UnsupportedError(line, "linear", "weight must be 2-d [out, in]")
        if x.ndim < 2:
            raise UnsupportedError(line, "linear", "a 1-d input is not modelled")
        self.unify(x.shape[-1], w.shape[1], "linear", line)
        args = [x, w]
        if b is not None:
            self.unify(b.shape[0] if b.ndim == 1 else -1, w.shape[0], "linear bias", line)
            args.append(b)
        self.dtensor_guard("linear", args, line)
        return self.op("linear", args, {}, tuple(x.shape[:-1]) + (w.shape[0],), self.promote(x.dtype, w.dtype), line)

    def cast(self, x: Tensor, dtype: str, line: int | None) -> Tensor:
        if dtype == x.dtype:
            return x
        (x,), dt = self.dtensor_pointwise("cast", [x], line)
        return self.op("cast", [x], {"dtype": dtype}, x.shape, dtype, line, dt=dt, dt_mesh=x.dt_mesh)

    def where(self, cond: Tensor, a, b, line: int | None) -> Tensor:
        a = a if isinstance(a, Tensor) else self.const_tensor(a, line)
        b = b if isinstance(b, Tensor) else self.const_tensor(b, line)
        shape = self.broadcast([cond.shape, a.shape, b.shape], line)
        self.dtensor_guard("where", [cond, a, b], line)
        return self.op("where", [cond, a, b], {}, shape, self.promote(a.dtype, b.dtype), line)

    def masked_fill(self, x: Tensor, mask: Tensor, value, line: int | None) -> Tensor:
        if isinstance(value, Tensor):
            if value.ndim:
                raise UnsupportedError(line, "masked_fill", "the fill value must be a number or a 0-d tensor")
            return self.where(mask, value, x, line)
        if self.dims.depends_on_mesh(value):
            return self.where(mask, self.scalar_tensor(value, line), x, line)
        shape = self.broadcast([x.shape, mask.shape], line)
        self.unify(self.numel(shape), self.numel(x.shape), "masked_fill", line)
        self.dtensor_guard("masked_fill", [x, mask], line)
        return self.op("masked_fill", [x, mask], {"value": self.scalar_attr(value, line)}, x.shape, x.dtype, line)


def _base_name(name: str) -> str:
    head, _, tail = name.rpartition("_")
    return head if head and tail.isdigit() else name


__all__ = ["Emitter", "FLOATS", "COMPARISONS", "is_one"]
