"""Integer index tensors (top-k indices, gathered rows) as inputs sampled the way the file draws them.

A kernel that reads an integer input tensor as an index (``KV[b, TopkIndices[b, s, i], d]``), a
loop bound or a region start cannot take it as a symbolic input: the element it selects must be
known.  The run (``capture.py``) records how the file made each tensor; when the tensor the file
launches the kernel with is ``torch.randint(low, high, shape)`` (possibly followed by dtype or
device conversions), with ``shape`` its real shape and ``high`` the real size of an axis of the
kernel's tensors (the rows the indices select), the check draws it once the same way at the
reduced sizes: ``randint(low, <that axis's reduced size>, <the reduced shape>)`` with a fixed
seed.  The one sample is used by the proof, the reference's re-run and every concrete run, and
every proven line says so ("TopkIndices (int32) fixed to one sample of the file's
torch.randint(0, KV axis 1), other values not proven").  Anything else the file makes an index
tensor with (offsets from a cumsum, a block table, a top-k of scores) stays ``unsupported`` with
what it was made by: an index tensor's domain is never guessed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import Unsupported
from .program import Kernel, Load, Loop, Region, Store, TileOp, While, walk_expr, walk_stmts

_INTEGERS = ("int32", "int64", "int16", "uint32", "int8", "uint8")
_CONVERSIONS = {"to", "int", "long", "cuda", "contiguous", "clone"}  # keep the values of what they convert
_SEED = 23


@dataclass(frozen=True)
class IndexSample:
    """Parameter ``name`` is drawn as ``randint(low, high)``, ``high`` the reduced size of each of
    ``axes`` ((parameter, axis) whose real size is the file's ``high``)."""

    name: str
    dtype: str
    low: int
    axes: tuple[tuple[str, int], ...]
    real_high: int

    def describe(self) -> str:
        axes = " = ".join(f"{param} axis {axis}" for param, axis in self.axes)
        return (f"{self.name} ({self.dtype}) fixed to one sample of the file's torch.randint({self.low}, {axes}) at the "
                f"reduced sizes, other values not proven")

    def values(self, shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]], number: int) -> np.ndarray:
        highs = {shapes[param][axis] for param, axis in self.axes if param in shapes and axis < len(shapes[param])}
        if len(highs) != 1:
            raise Unsupported(None, f"index tensor {self.name} is drawn below {self.real_high}, the real size of "
                              f"{len(self.axes)} axes the reduction gives different sizes ({sorted(highs)})")
        high = highs.pop()
        if high <= self.low:
            raise Unsupported(None, f"index tensor {self.name}: randint({self.low}, {high}) is empty at the reduced sizes")
        values = np.random.default_rng(_SEED + number).integers(self.low, high, size=shape)
        if values.size >= 2 and high - self.low >= 2:  # both ends of the range occur
            values.flat[0], values.flat[-1] = self.low, high - 1
        return values.astype(np.int64)


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
    ``torch.randint`` this module can redraw."""
    plan: list[IndexSample] = []
    for name in sorted(index_reads(kernel)):
        tensor = tensors.get(name)
        if tensor is None:
            raise Unsupported(kernel.line, f"index tensor {name}: the launch that passes it was not recorded")
        made = _maker(tensor, derivations)
        what = getattr(getattr(made, "func", None), "__name__", None) or "a value the run did not record"
        if made is None or what != "randint":
            raise Unsupported(kernel.line, f"the kernel reads {name} as an index; the file makes it with {what}, and "
                              "only an index tensor drawn by torch.randint(low, high, shape) is sampled (its domain "
                              "is not guessed)")
        low, high, shape = _randint_arguments(made)
        if shape is None or tuple(shape) != tuple(tensor.shape):
            raise Unsupported(kernel.line, f"index tensor {name} is a part of what torch.randint drew, not sampled")
        axes = tuple((param.name, axis) for param in kernel.params if param.name != name and param.name in tensors
                     for axis, size in enumerate(getattr(tensors[param.name], "shape", ())) if size == high)
        if not axes or _is_size(low, tensors):
            raise Unsupported(kernel.line, f"index tensor {name} is drawn by torch.randint({low}, {high}): "
                              f"{'no' if not axes else 'a bound other than the'} axis of the kernel's tensors "
                              "gives its range, so its reduced range is unknown")
        plan.append(IndexSample(name, kernel.buffer(name).dtype, low, axes, high))
    return tuple(plan)


def _maker(tensor: Any, derivations: dict[int, Any]) -> Any:
    made = derivations.get(id(tensor))
    for _ in range(8):
        if made is None or getattr(made.func, "__name__", "") not in _CONVERSIONS or not made.args:
            return made
        if made.kwargs.get("dtype") is not None and "int" not in str(made.kwargs["dtype"]):
            return made
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
