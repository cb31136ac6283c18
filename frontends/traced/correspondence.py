"""Which piece of each reference leaf a rank holds.

Sources, in order: ``--param-layout NAME=Shard(d)|Replicate`` (the user), DTensor placements,
Megatron's parameter metadata (``tensor_model_parallel``, ``partition_dim``,
``partition_stride``), else the shapes (equal: replicated; exactly one dim smaller by the
world size: the rank's contiguous chunk of it).  Anything else is an error naming the
parameter: a layout is never guessed silently.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the run imports torch, which checking a recording does not need
    from .run import Leaf, Region

_LAYOUT = re.compile(r"^\s*(?:Shard\(\s*(-?\d+)\s*\)|(Replicate)(?:\(\s*\))?)\s*$")


class LayoutError(Exception):
    """A rank's piece of a leaf cannot be related to the reference leaf."""


@dataclass(frozen=True)
class Layout:
    region: Region
    source: str                  # "dtensor" | "megatron" | "shape" | "user" | "replicated"
    sentence: str | None         # the assumption to report (None when replicated)


# ``--no-grad NAME`` travels to the tracing child among the per-leaf statements of the request's
# layouts, as this value (the runner's request carries no field of its own for it)
NO_GRAD = "no-grad"


def split_no_grad(statements: dict[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """(layouts, names the user says are not trained) from the request's per-leaf statements."""
    layouts = {name: value for name, value in statements.items() if value != NO_GRAD}
    return layouts, tuple(name for name, value in statements.items() if value == NO_GRAD)


def parse_layouts(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["fc1.weight=Shard(0)"]`` -> ``{"fc1.weight": "Shard(0)"}`` (checked, never evaluated)."""
    layouts = {}
    for item in items:
        name, sep, layout = item.partition("=")
        if not sep or not name.strip() or not _LAYOUT.match(layout):
            raise LayoutError(f"--param-layout {item!r}: expected NAME=Shard(d) or NAME=Replicate")
        layouts[name.strip()] = layout.strip()
    return layouts


def _whole(shape) -> Region:
    return tuple((0, int(n)) for n in shape)


def _chunk(shape, dim: int, rank: int, world: int) -> Region:
    size = int(shape[dim]) // world
    return tuple((rank * size, (rank + 1) * size) if d == dim else (0, int(n)) for d, n in enumerate(shape))


def layout_of(leaf: Leaf, rank: int, world: int, user: dict[str, str]) -> Layout:
    shape, local = leaf.shape, leaf.local_shape
    if leaf.name in user:
        match = _LAYOUT.match(user[leaf.name])
        if match.group(2):
            region = _whole(shape)
        else:
            dim = int(match.group(1)) % max(len(shape), 1)
            if int(shape[dim]) % world:
                raise LayoutError(f"--param-layout {leaf.name}={user[leaf.name]}: dim {dim} of size {shape[dim]} "
                                  f"does not split into {world} chunks")
            region = _chunk(shape, dim, rank, world)
        return _checked(leaf, region, "user")
    if leaf.region is not None:
        return _checked(leaf, leaf.region, leaf.layout_source or "dtensor")
    if leaf.megatron is not None:
        dim, stride = leaf.megatron
        if stride != 1:
            raise LayoutError(f"parameter {leaf.name}: Megatron partition_stride={stride} (interleaved partitions) "
                              f"is not modelled; give --param-layout")
        if not 0 <= dim < len(shape):
            raise LayoutError(f"parameter {leaf.name}: Megatron partition_dim={dim} is not a dim of its shape {shape}")
        return _checked(leaf, _chunk(shape, dim, rank, world), "megatron")
    if tuple(shape) == tuple(local):
        return Layout(_whole(shape), "replicated", None)
    shrunk = [d for d, (g, n) in enumerate(zip(shape, local)) if g != n]
    if len(shape) == len(local) and len(shrunk) == 1 and int(local[shrunk[0]]) * world == int(shape[shrunk[0]]):
        return _checked(leaf, _chunk(shape, shrunk[0], rank, world), "shape")
    raise LayoutError(f"parameter {leaf.name}: the rank holds shape {tuple(local)} of the reference shape "
                      f"{tuple(shape)}; no single dim shrank by the world size {world}: give --param-layout")


def _checked(leaf: Leaf, region: Region, source: str) -> Layout:
    extent = tuple(stop - start for start, stop in region)
    if extent != tuple(leaf.local_shape):
        raise LayoutError(f"parameter {leaf.name}: the {source} layout gives a piece of shape {extent}, but the "
                          f"rank holds shape {tuple(leaf.local_shape)}")
    if region == _whole(leaf.shape):
        return Layout(region, source, None)
    dims = [str(d) for d, (start, stop) in enumerate(region) if (start, stop) != (0, leaf.shape[d])]
    return Layout(region, source, f"{leaf.kind} {leaf.name}: rank r holds the r-th contiguous chunk of dim "
                                  f"{', '.join(dims)} (layout from {source})")
