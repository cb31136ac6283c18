"""The integer ops a mixture-of-experts dispatch computes from its router's choices: tokens per expert
(``bincount``), the tokens sorted by expert (a stable ``sort``), and the expert of each row received
(``repeat_interleave`` of the counts).  Each is exact in Z3 too: sums of comparisons of the choices,
so the proof holds for every choice the symbolic router makes; sizes that depend on the values
(``bincount``'s length, ``repeat_interleave``'s) are the recorded ones (``count``), and the recorder
states the path taken as an assumption, as for ``nonzero``.
"""
from __future__ import annotations

import numpy as np

from ..registry import norm_dim
from .aten import AtenUnsupported, aten, call, kind_of, literal, to_kind


def _number(value):
    """The one element of a 0-d result of either backend."""
    return np.asarray(value, dtype=object).reshape(())[()]


def _vector(xp, items: list, kind: str):
    """A 1-d value of ``items`` (numbers or terms)."""
    if xp.symbolic:
        return np.array(items + [None], dtype=object)[:-1]
    return np.array(items, dtype=np.float64 if kind == "float" else np.int64)


def _recorded_count(kind: str, attrs: dict) -> int:
    if attrs.get("count") is None:
        raise AtenUnsupported(f"{kind} without the size the recording found")
    return int(attrs["count"])


def _bincount(xp, args, attrs, ctx):
    """``out[e]`` = the number (or the summed ``weights``) of the elements equal to ``e``."""
    length = _recorded_count("bincount", attrs)
    x = np.reshape(to_kind(xp, args[0], "int"), -1)
    weighted = len(args) > 1
    kind = "float" if weighted else "int"
    weights = np.reshape(to_kind(xp, args[1], "float"), -1) if weighted else \
        literal(xp, np.ones(np.size(x)), "int")
    zeros = literal(xp, np.zeros(np.size(x)), kind)
    counts = []
    for value in range(length):
        hit = xp.compare("eq", x, literal(xp, np.full(np.size(x), value), "int"))
        counts.append(_number(call("sum", xp, [xp.where(hit, weights, zeros)], dim=[0])) if np.size(x) else 0)
    return [_vector(xp, counts, kind)]


aten("aten.bincount.default", _bincount)


def _sort(xp, args, attrs, ctx):
    """(values, indices) sorted along ``dim``, ties in their first order: element i goes to the number
    of elements before it in the order (smaller ones, and equal ones at lower positions).  Only the
    stable sort: torch leaves the order of ties of the default one to its implementation."""
    if not attrs.get("stable"):
        raise AtenUnsupported("sort without stable=True (torch does not fix the order of equal elements)")
    x = args[0]
    if np.ndim(x) == 0:
        return [x, literal(xp, np.zeros(()), "int")]
    dim = norm_dim(int(attrs.get("dim", -1)), np.ndim(x))
    before = "gt" if attrs.get("descending") else "lt"
    moved = np.moveaxis(np.asarray(x, dtype=object if xp.symbolic else None), dim, -1)
    kind = kind_of(xp, x)
    values, indices = np.empty(moved.shape, dtype=object), np.empty(moved.shape, dtype=object)
    length = moved.shape[-1]
    ones, zeros = literal(xp, np.ones(length), "int"), literal(xp, np.zeros(length), "int")
    positions, no_value = literal(xp, np.arange(length), "int"), literal(xp, np.zeros(length), kind)
    for lead in np.ndindex(*moved.shape[:-1]):
        row = moved[lead]
        places = []
        for i in range(length):
            mine = np.full(length, row[i], dtype=object if xp.symbolic else row.dtype)
            ahead = xp.logical("or", xp.compare(before, row, mine),
                               xp.logical("and", xp.compare("eq", row, mine), literal(xp, np.arange(length) < i, "bool")))
            places.append(_number(call("sum", xp, [xp.where(ahead, ones, zeros)], dim=[0])))
        places = _vector(xp, places, "int")
        for p in range(length):
            at = xp.compare("eq", places, literal(xp, np.full(length, p), "int"))
            values[lead + (p,)] = _number(call("sum", xp, [xp.where(at, row, no_value)], dim=[0]))
            indices[lead + (p,)] = _number(call("sum", xp, [xp.where(at, positions, zeros)], dim=[0]))
    values, indices = np.moveaxis(values, -1, dim), np.moveaxis(indices, -1, dim)
    if not xp.symbolic:
        values = values.astype(np.float64 if kind == "float" else bool if kind == "bool" else np.int64)
        indices = indices.astype(np.int64)
    return [values, indices]


aten("aten.sort.stable", _sort)


def _repeat_interleave(xp, args, attrs, ctx):
    """``repeat_interleave(repeats)``: position p holds the k with ``repeats[:k].sum() <= p < repeats[:k+1].sum()``
    (the expert of each row an all-to-all delivered, from the counts per expert)."""
    length = _recorded_count("repeat_interleave", attrs)
    repeats = np.reshape(to_kind(xp, args[0], "int"), -1)
    ends = np.cumsum(repeats) if np.size(repeats) else repeats
    starts = ends - repeats if np.size(repeats) else repeats
    size = np.size(repeats)
    ids, zeros = literal(xp, np.arange(size), "int"), literal(xp, np.zeros(size), "int")
    out = []
    for p in range(length):
        here = literal(xp, np.full(size, p), "int")
        inside = xp.logical("and", xp.compare("le", starts, here), xp.compare("lt", here, ends))
        out.append(_number(call("sum", xp, [xp.where(inside, ids, zeros)], dim=[0])))
    return [_vector(xp, out, "int")]


aten("aten.repeat_interleave.Tensor", _repeat_interleave)
