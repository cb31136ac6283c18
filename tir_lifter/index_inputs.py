"""Integer index tensors (top-k indices, gathered rows) as inputs sampled the way the file draws them.

A kernel that reads an integer input tensor as an index (``KV[b, TopkIndices[b, s, i], d]``), a
loop bound or a region start cannot take it as a symbolic input: the element it selects must be
known.  The run (``capture.py``) records how the file made each tensor; when the tensor the file
launches the kernel with is ``torch.randint(low, high, shape)`` (possibly followed by dtype or
device conversions, or by ``view`` / ``reshape`` / ``unsqueeze`` / ``squeeze`` / ``flatten``, which
keep its values in order), with ``shape`` as many entries as the tensor and ``high`` the real size
of an axis of the kernel's tensors (the rows the indices select), the check draws it once the
same way at the reduced sizes: ``randint(low, <that axis's reduced size>, <the reduced shape>)`` with a fixed
seed.  The one sample is used by the proof, the reference's re-run and every concrete run, and
every proven line says so ("TopkIndices (int32) fixed to one sample of the file's
torch.randint(0, KV axis 1), other values not proven").  A table numbering every row of an axis
once (a paged KV cache's block table: ``torch.randperm(n)`` or ``torch.arange(n)``, viewed as the
table's shape, ``n`` its number of entries and the real size of that axis) is redrawn by the
same call at that axis's reduced size, provided the reduced table still has one entry per row
(else the relation the file built is lost and the kernel is ``unsupported``).  Anything else the
file makes an index tensor with (in-place fills, a top-k of scores, a literal list) stays
``unsupported`` with what it was made by: an index tensor's domain is never guessed.  Sequence
offsets (``cu_seqlens``: a 0 joined to a ``cumsum`` of lengths) are refused naming the size their
total is (the packed rows): a sample at the reduced sizes would have to be drawn together with
that size, which the reduction (sizes first, then samples) does not do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import Unsupported
from .program import Kernel, Load, Loop, Region, Store, TileOp, While, walk_expr, walk_stmts

_INTEGERS = ("int32", "int64", "int16", "uint32", "int8", "uint8")
_CONVERSIONS = {"to", "int", "long", "cuda", "contiguous", "clone"}  # keep the values of what they convert
# keep the values in their order, another shape (never a view as another dtype; never ``expand``, which repeats them)
_RESHAPES = {"view", "reshape", "unsqueeze", "squeeze", "flatten"}
_TABLES = ("randperm", "arange")  # every row of an axis numbered once: shuffled, in order
_OFFSETS = ("pad", "cat")  # a 0 joined to a cumulative sum: sequence offsets (``cu_seqlens``)
_SEED = 23


@dataclass(frozen=True)
class IndexSample:
    """Parameter ``name`` is drawn as ``randint(low, high)`` (or, ``maker`` ``randperm`` /
    ``arange``, as a table numbering ``high`` rows once), ``high`` the reduced size of each of
    ``axes`` ((parameter, axis) whose real size is the file's ``high``)."""

    name: str
    dtype: str
    low: int
    axes: tuple[tuple[str, int], ...]
    real_high: int
    maker: str = "randint"

    def describe(self) -> str:
        axes = " = ".join(f"{param} axis {axis}" for param, axis in self.axes)
        call = f"randint({self.low}, {axes})" if self.maker == "randint" else f"{self.maker}({axes})"
        return (f"{self.name} ({self.dtype}) fixed to one sample of the file's torch.{call} at the reduced sizes, "
                "other values not proven")

    def values(self, shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]], number: int) -> np.ndarray:
        highs = {shapes[param][axis] for param, axis in self.axes if param in shapes and axis < len(shapes[param])}
        if len(highs) != 1:
            raise Unsupported(None, f"index tensor {self.name} is drawn below {self.real_high}, the real size of "
                              f"{len(self.axes)} axes the reduction gives different sizes ({sorted(highs)})")
        high = highs.pop()
        if self.maker in _TABLES:
            return self._table(shape, high, number)
        if high <= self.low:
            raise Unsupported(None, f"index tensor {self.name}: randint({self.low}, {high}) is empty at the reduced sizes")
        values = np.random.default_rng(_SEED + number).integers(self.low, high, size=shape)
        if values.size >= 2 and high - self.low >= 2:  # both ends of the range occur
            values.flat[0], values.flat[-1] = self.low, high - 1
        return values.astype(np.int64)

    def _table(self, shape: tuple[int, ...], high: int, number: int) -> np.ndarray:
        entries = int(np.prod(shape, dtype=np.int64))
        if entries != high:  # the file's table has one entry per row: the reduction must keep that
            raise Unsupported(None, f"index tensor {self.name} numbers the {self.real_high} rows of the file's "
                              f"torch.{self.maker}({self.real_high}) once; at the reduced sizes it has {entries} "
                              f"entries for {high} rows, so the table the file builds has no reduced counterpart")
        values = np.arange(high) if self.maker == "arange" else np.random.default_rng(_SEED + number).permutation(high)
        return values.reshape(shape).astype(np.int64)


def index_reads(kernel: Kernel) -> set[str]:
    """Integer input tensors the kernel reads as an index, a loop bound or a region start (itself or
    an on-chip copy of it); not one it writes (an output's values are the kernel's, never sampled)."""
    from .checks import written_buffers
    written = written_buffers(kernel)
    candidates = {b.name for b in kernel.params if b.dtype in _INTEGERS and b.name not in written}
    copies: dict[str, str] = {}
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, TileOp) and stmt.kind == "copy":
            src, dst = stmt.operands[0], stmt.operands[1]
            if isinstance(src, Region) and isinstance(dst, Region) and (src.buffer in candidates or src.buffer in copies):
                copies[dst.buffer] = copies.get(src.buffer, src.buffer)
    names = candidates | set(copies)

    def reads(expr: Any) -> set[str]:
        return {copies.get(e.buffer, e.buffer) for e in walk_expr(expr) if isinstance(e, Load) and e.buffer in names}
    found: set[str] = set()
    for stmt in walk_stmts(kernel.body):
        positions: list[Any] = []
        if isinstance(stmt, Store):
            positions += list(stmt.indices)
            positions += [i for e in walk_expr(stmt.value) if isinstance(e, Load) for i in e.indices]
        elif isinstance(stmt, TileOp):
            for operand in stmt.operands:
                if isinstance(operand, Region):
                    positions += list(operand.starts) + list(operand.extents or ())
                else:
                    positions += [i for e in walk_expr(operand) if isinstance(e, Load) for i in e.indices]
        elif isinstance(stmt, Loop):
            positions.append(stmt.extent)
        elif isinstance(stmt, While):
            positions.append(stmt.cond)
        for position in positions:
            found |= reads(position)
    return found & candidates


def sample_plan(kernel: Kernel, tensors: dict[str, Any], derivations: dict[int, Any]) -> tuple[IndexSample, ...]:
    """The samples of the kernel's index tensors from how the file made ``tensors`` (parameter ->
    the tensor a launch passed); ``Unsupported`` when one is read as an index and not made by a
    ``torch.randint``, ``torch.randperm`` or ``torch.arange`` this module can redraw."""
    plan: list[IndexSample] = []
    for name in sorted(index_reads(kernel)):
        tensor = tensors.get(name)
        if tensor is None:
            raise Unsupported(kernel.line, f"index tensor {name}: the launch that passes it was not recorded")
        made = _maker(tensor, derivations)
        what = getattr(getattr(made, "func", None), "__name__", None) or (
            "a value the run did not record" if made is None else  # voided by an in-place change
            "a tensor it then changes in place (an element assignment or an in-place op)")
        if made is not None and what in _OFFSETS and _is_cumsum_of(made, derivations):
            raise Unsupported(kernel.line, _offsets_reason(kernel, name, tensor, what, tensors))
        if made is None or what not in ("randint",) + _TABLES:
            raise Unsupported(kernel.line, f"the kernel reads {name} as an index; the file makes it with {what}, and "
                              "only an index tensor drawn by torch.randint(low, high, shape), or a table "
                              "torch.randperm(n) / torch.arange(n) numbering n rows, is sampled (its domain is not "
                              "guessed)")
        if what in _TABLES:
            plan.append(_table_sample(kernel, name, tensor, made, tensors))
            continue
        low, high, shape = _randint_arguments(made)
        if shape is None or _entries(shape) != _entries(tensor.shape):
            raise Unsupported(kernel.line, f"index tensor {name} is a part of what torch.randint drew, not sampled")
        axes = tuple((param.name, axis) for param in kernel.params if param.name != name and param.name in tensors
                     for axis, size in enumerate(getattr(tensors[param.name], "shape", ())) if size == high)
        if not axes or _is_size(low, tensors):
            raise Unsupported(kernel.line, f"index tensor {name} is drawn by torch.randint({low}, {high}): "
                              f"{'no' if not axes else 'a bound other than the'} axis of the kernel's tensors "
                              "gives its range, so its reduced range is unknown")
        plan.append(IndexSample(name, kernel.buffer(name).dtype, low, axes, high))
    return tuple(plan)


def _table_sample(kernel: Kernel, name: str, tensor: Any, made: Any, tensors: dict[str, Any]) -> IndexSample:
    """``randperm(n)`` / ``arange(n)`` (from 0, step 1) with ``n`` the table's entries and the real
    size of an axis of another of the kernel's tensors: each of its rows numbered once."""
    what = made.func.__name__
    args = [a for a in made.args if not isinstance(a, (tuple, list))]
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    keywords = {k: v for k, v in made.kwargs.items() if k in ("start", "end", "step", "n")}
    n = None
    if len(ints) == len(args) and not keywords:
        if what == "randperm" and len(ints) == 1:
            n = ints[0]
        elif what == "arange" and (len(ints) == 1 or ints[:1] == [0] and ints[2:] in ([], [1]) and len(ints) <= 3):
            n = ints[-1] if len(ints) < 3 else ints[1]
    if n is None:
        raise Unsupported(kernel.line, f"index tensor {name} is made by torch.{what} with arguments other than one "
                          "count of rows, not sampled")
    if n != _entries(tensor.shape):
        raise Unsupported(kernel.line, f"index tensor {name} has {_entries(tensor.shape)} entries, not the {n} "
                          f"rows torch.{what}({n}) numbers: a part of that table, not sampled")
    axes = tuple((param.name, axis) for param in kernel.params if param.name != name and param.name in tensors
                 for axis, size in enumerate(getattr(tensors[param.name], "shape", ())) if size == n)
    if not axes:
        raise Unsupported(kernel.line, f"index tensor {name} numbers {n} rows (torch.{what}({n})), the size of no "
                          "axis of the kernel's tensors, so its reduced size is unknown")
    return IndexSample(name, kernel.buffer(name).dtype, 0, axes, n, what)


def _is_cumsum_of(made: Any, derivations: dict[int, Any]) -> bool:
    """``made`` (a ``pad`` or ``cat``) has a ``torch.cumsum`` among what it joins: sequence offsets."""
    first = made.args[0] if made.args else None
    parts = first if isinstance(first, (tuple, list)) else (first,)
    return any(getattr(getattr(_maker(part, derivations), "func", None), "__name__", None) == "cumsum"
               for part in parts if part is not None)


def _offsets_reason(kernel: Kernel, name: str, tensor: Any, what: str, tensors: dict[str, Any]) -> str:
    """Why offsets ``[0, l0, l0 + l1, ...]`` are not sampled: their last entry is a size of the
    kernel's tensors (the packed rows), so the reduced sizes would have to be drawn with them."""
    joined = "torch.nn.functional.pad" if what == "pad" else f"torch.{what}"
    why = (f"the kernel reads {name} as an index; the file makes it as sequence offsets ({joined} of a "
           "torch.cumsum of lengths)")
    try:
        total = int(tensor.reshape(-1)[-1])
    except (RuntimeError, IndexError, NotImplementedError):  # a meta tensor: no values
        total = None
    axes = [f"{param.name} axis {axis}" for param in kernel.params if param.name != name and param.name in tensors
            for axis, size in enumerate(getattr(tensors[param.name], "shape", ())) if total is not None and size == total]
    if axes:
        why += (f", whose total {total} is the size of {' = '.join(axes)}: the reduced sizes would have to be "
                "drawn with the lengths, which is not modelled")
    return why + " (its domain is not guessed)"


def _entries(shape: Any) -> int:
    return int(np.prod(tuple(shape), dtype=np.int64))


def _maker(tensor: Any, derivations: dict[int, Any]) -> Any:
    made = derivations.get(id(tensor))
    for _ in range(8):
        name = getattr(getattr(made, "func", None), "__name__", "")
        if made is None or name not in _CONVERSIONS | _RESHAPES or not made.args:
            return made
        if made.kwargs.get("dtype") is not None and "int" not in str(made.kwargs["dtype"]):
            return made
        if name in _RESHAPES and not all(isinstance(a, int) or isinstance(a, (tuple, list)) and
                                         all(isinstance(b, int) for b in a) for a in made.args[1:]):
            return made  # ``view(torch.int32)`` reinterprets the bits: not the same values
        made = derivations.get(id(made.args[0]))
    return made


def _randint_arguments(made: Any) -> tuple[int, int, tuple[int, ...] | None]:
    args = list(made.args)
    kwargs = made.kwargs
    size = kwargs.get("size")
    if size is None and args and isinstance(args[-1], (tuple, list)):
        size = args.pop()
    if "low" in kwargs or "high" in kwargs:
        return int(kwargs.get("low", 0)), int(kwargs["high"]), tuple(size) if size is not None else None
    ints = [int(a) for a in args if isinstance(a, int)]
    low, high = (0, ints[0]) if len(ints) == 1 else (ints[0], ints[1]) if len(ints) == 2 else (0, -1)
    return low, high, tuple(size) if size is not None else None


def _is_size(value: int, tensors: dict[str, Any]) -> bool:
    return value > 1 and any(value in tuple(getattr(t, "shape", ())) for t in tensors.values())


def sampled_values(kernel: Kernel, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Each sampled index tensor's values at the reduced ``shapes``."""
    return {s.name: s.values(shapes[s.name], shapes, number) for number, s in enumerate(kernel.samples)}


def describe_samples(kernel: Kernel, names: set[str]) -> list[str]:
    return [s.describe() for s in kernel.samples if s.name in names]
