"""Which piece of each reference parameter a rank holds: the slice its recorded values show.

The recorder keeps every parameter's values as the code built them, on one device and on each
rank.  Proposals - ``--param-layout NAME=Shard(d)|Replicate`` (the user), DTensor placements,
Megatron's ``partition_dim``/``partition_stride``, and the shapes (every way of cutting the dims
that shrank into equal chunks, contiguous or strided: chunk j of each of s blocks, which covers
``w[r::k]``, Megatron's interleaved partitions and fused per-head blocks) - are candidates; a
candidate holds when the reference's values at its positions are the rank's values exactly.  When
none does and one dim shrank, the positions are found hyperplane by hyperplane (fused blocks of
unequal sizes).  A parameter whose values show no slice (each rank drew numbers of its own) is
taken on the proposal only as ``confirmed=False``: the proof may then find a violation, never
``verified``.  Values equal under several candidates (a bias of zeros) are said as an assumption.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the run imports torch, which checking a recording does not need
    from .run import Leaf, Region

_LAYOUT = re.compile(r"^\s*(?:Shard\(\s*(-?\d+)\s*\)|(Replicate)(?:\(\s*\))?)\s*$")


def stated_shard_dim(statement: str | None, ndim: int) -> int | None:
    """The dim a ``Shard(d)`` statement names (negative dims counted from the end); None for
    ``Replicate``, no statement or a 0-d value."""
    match = _LAYOUT.match(statement) if statement else None
    if match is None or match.group(2) or ndim == 0:
        return None
    return int(match.group(1)) % ndim


def rank_block(shape: tuple, dim: int, rank: int, world: int) -> tuple[tuple[int, int], ...]:
    """Rank ``rank``'s contiguous block of ``dim`` (of ``world`` equal blocks) as a region of ``shape``."""
    step = int(shape[dim]) // world
    return tuple((rank * step, (rank + 1) * step) if d == dim else (0, int(n)) for d, n in enumerate(shape))


class LayoutError(Exception):
    """A rank's piece of a leaf cannot be related to the reference leaf."""


Index = tuple[tuple[int, ...], ...]   # per dim, the reference positions of the piece, in order


@dataclass(frozen=True)
class Layout:
    index: Index
    source: str                  # "values" | "dtensor" | "megatron" | "shape" | "user" | "replicated"
    sentence: str | None         # the assumption to report (None: replicated, as the values show)
    confirmed: bool = True       # False: the values show no slice; taken on the proposal alone

    @property
    def region(self) -> Region | None:
        """The piece as a box of the reference leaf, or None when some dim is not one run."""
        return box(self.index)


def box(index: Index) -> Region | None:
    region = []
    for positions in index:
        if not positions or list(positions) != list(range(positions[0], positions[0] + len(positions))):
            return None
        region.append((positions[0], positions[0] + len(positions)))
    return tuple(region)


@dataclass(frozen=True)
class _Candidate:
    index: Index
    source: str
    words: str                   # how the piece is cut, said to the user


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


def _positions(size: int, chunks: int, chunk: int, stride: int = 1) -> tuple[int, ...]:
    """Chunk ``chunk`` of ``chunks`` in each of ``stride`` equal blocks of a dim of ``size``
    (Megatron's ``partition_stride``; ``stride`` = the piece's size is ``w[chunk::chunks]``)."""
    block = size // stride
    part = block // chunks
    return tuple(b * block + chunk * part + i for b in range(stride) for i in range(part))


def _all(shape) -> Index:
    return tuple(tuple(range(int(n))) for n in shape)


def _cut(shape, dim: int, positions: tuple[int, ...]) -> Index:
    return tuple(positions if d == dim else tuple(range(int(n))) for d, n in enumerate(shape))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _words(dim: int, chunks: int, chunk: int, stride: int, size: int, rank: int) -> str:
    """How rank r's piece is cut ("r" when the chunk is the rank's own: one sentence for all ranks)."""
    which = "r" if chunk == rank else str(chunk)
    if stride == 1:
        return f"chunk {which} of {chunks} contiguous chunks of dim {dim}"
    if stride * chunks == size:
        return f"positions {which}, {which} + {chunks}, {which} + {2 * chunks}, ... of dim {dim} (strided)"
    return f"chunk {which} of {chunks} in each of {stride} blocks of dim {dim} (partition stride {stride})"


def _proposals(leaf: Leaf, rank: int, world: int, user: dict[str, str]) -> list[_Candidate]:
    """What the user, DTensor and Megatron say the rank holds."""
    shape, out = tuple(int(n) for n in leaf.shape), []
    if leaf.name in user:
        match = _LAYOUT.match(user[leaf.name])
        if match.group(2):
            out.append(_Candidate(_all(shape), "user", "the whole parameter"))
        else:
            dim = int(match.group(1)) % max(len(shape), 1)
            if shape[dim] % world:
                raise LayoutError(f"--param-layout {leaf.name}={user[leaf.name]}: dim {dim} of size {shape[dim]} "
                                  f"does not split into {world} chunks")
            out.append(_Candidate(_cut(shape, dim, _positions(shape[dim], world, rank)), "user",
                                  _words(dim, world, rank, 1, shape[dim], rank)))
    if leaf.region is not None:
        out.append(_Candidate(tuple(tuple(range(a, b)) for a, b in leaf.region), leaf.layout_source or "dtensor",
                              "the block its placements give"))
    if leaf.megatron is not None:
        dim, stride = leaf.megatron
        if 0 <= dim < len(shape) and stride >= 1 and shape[dim] % (stride * world) == 0:
            out.append(_Candidate(_cut(shape, dim, _positions(shape[dim], world, rank, stride)), "megatron",
                                  _words(dim, world, rank, stride, shape[dim], rank)))
    for candidate in out:
        extent = tuple(len(p) for p in candidate.index)
        if candidate.source == "user" and extent != tuple(leaf.local_shape):
            raise LayoutError(f"parameter {leaf.name}: --param-layout {leaf.name}={user[leaf.name]} gives a piece of "
                              f"shape {extent}, but the rank holds shape {tuple(leaf.local_shape)}")
    return [c for c in out if tuple(len(p) for p in c.index) == tuple(leaf.local_shape)]


def _shape_family(leaf: Leaf, rank: int, world: int, limit: int = 4096) -> list[_Candidate]:
    """Every equal-chunk cut of the dims that shrank, this rank's contiguous chunk first."""
    shape, local = tuple(int(n) for n in leaf.shape), tuple(int(n) for n in leaf.local_shape)
    if len(shape) != len(local) or any(n > g or n == 0 or g % n for g, n in zip(shape, local)):
        return []
    shrunk = [d for d, (g, n) in enumerate(zip(shape, local)) if g != n]
    if not shrunk:
        return [_Candidate(_all(shape), "shape", "the whole parameter")]
    options = []
    for d in shrunk:
        chunks = shape[d] // local[d]
        mine = [(1, rank % chunks)]
        cuts = mine + [(s, j) for s in _divisors(local[d]) for j in range(chunks) if (s, j) != mine[0]]
        options.append([(d, chunks, j, s) for s, j in cuts])
    out = []
    for combo in itertools.islice(itertools.product(*options), limit):
        index = list(_all(shape))
        words = []
        for d, chunks, j, s in combo:
            index[d] = _positions(shape[d], chunks, j, s)
            words.append(_words(d, chunks, j, s, shape[d], rank))
        out.append(_Candidate(tuple(index), "shape", " and ".join(words)))
    return out


def _holds(whole, piece, index: Index) -> bool:
    import numpy as np

    try:
        return bool(np.array_equal(whole[np.ix_(*index)], piece, equal_nan=True))
    except (IndexError, ValueError, TypeError):
        return False


def _by_hyperplanes(leaf: Leaf, whole, piece) -> _Candidate | None:
    """One dim shrank: the reference position of each of the piece's hyperplanes, when each equals
    exactly one hyperplane of the reference (fused blocks of unequal sizes, any order)."""
    import numpy as np

    shape, local = tuple(int(n) for n in leaf.shape), tuple(int(n) for n in leaf.local_shape)
    shrunk = [d for d, (g, n) in enumerate(zip(shape, local)) if g != n]
    if len(shape) != len(local) or len(shrunk) != 1:
        return None
    d = shrunk[0]
    planes = np.moveaxis(whole, d, 0).reshape(shape[d], -1)
    mine = np.moveaxis(piece, d, 0).reshape(local[d], -1)
    positions = []
    for row in mine:
        found = [p for p in range(shape[d]) if np.array_equal(planes[p], row, equal_nan=True)]
        if len(found) != 1 or found[0] in positions:
            return None
        positions.append(found[0])
    return _Candidate(_cut(shape, d, tuple(positions)), "values", f"positions {_runs(positions)} of dim {d}")


def _runs(positions) -> str:
    runs, start = [], None
    for i, p in enumerate(positions):
        if start is None:
            start = p
        if i + 1 == len(positions) or positions[i + 1] != p + 1:
            runs.append(f"{start}" if start == p else f"{start}:{p + 1}")
            start = None
    return "[" + ", ".join(runs) + "]"


def layout_of(leaf: Leaf, rank: int, world: int, user: dict[str, str], whole=None, piece=None,
              prefer: Index | None = None, alike: bool = False) -> Layout:
    """The rank's piece of ``leaf``: the candidate the values ``whole`` (one device) and ``piece``
    (this rank) confirm.  ``prefer``: the piece a sibling parameter's values showed (taken when
    the values cannot tell).  ``alike``: every rank built the same numbers for a piece smaller than
    the parameter (each drew its own from the same seed), which shows no layout."""
    proposals = _proposals(leaf, rank, world, user)
    family = _shape_family(leaf, rank, world)
    if not proposals and not family:
        raise LayoutError(f"parameter {leaf.name}: the rank holds shape {tuple(leaf.local_shape)} of the reference "
                          f"shape {tuple(leaf.shape)}, which no equal split of its dims gives: give --param-layout")
    candidates = proposals + family
    if whole is None or piece is None or alike:
        matches = []
    else:
        matches = [c for c in candidates if _holds(whole, piece, c.index)]
        if not matches:
            found = _by_hyperplanes(leaf, whole, piece)
            matches = [found] if found is not None else []
    if not matches:
        stated = next((c for c in proposals if c.source == "user"), None)
        if stated is not None:
            return _layout(leaf, stated, "as stated by --param-layout; its values show no slice of the "
                                         "single-device parameter", True)
        placed = next((c for c in proposals if c.source == "dtensor"), None)
        if placed is not None:   # distribute_tensor scatters from rank 0: no real values on a simulated rank
            return _layout(leaf, placed, "as its DTensor placements define it; the values a simulated rank holds "
                                         "came from a simulated scatter and show nothing", True)
        taken = proposals[0] if proposals else family[0]
        why = ("every rank built the same numbers for it (each drew its own piece from the same seed?)" if alike
               else "its values on a rank are no slice of the single-device parameter (numbers drawn on the rank "
                    "itself?)")
        return _layout(leaf, taken, f"NOT confirmed: {why}; taken from {taken.source} so that a difference can be "
                                    f"shown, never a proof (--param-layout {leaf.name}=... states it)", False)
    distinct = list({c.index: c for c in reversed(matches)}.values())[::-1]
    if len(distinct) == 1:
        chosen = matches[0]
        agreeing = next((c for c in proposals if c.index == chosen.index), None)
        said = "as its values show" if agreeing is None else f"from {agreeing.source}, confirmed by its values"
        return _layout(leaf, chosen if agreeing is None else agreeing, said, True)
    order = [c for c in matches if c.source == "user"] + [c for c in matches if c.index == prefer] + \
        [c for c in matches if c in proposals] + matches
    chosen = order[0]
    why = ("a sibling parameter's values show" if chosen.index == prefer and chosen.source != "user"
           else f"from {chosen.source}")
    return _layout(leaf, chosen, f"its values are the same under {len(distinct)} candidate layouts (e.g. all "
                                 f"equal), so they cannot tell which; assumed {why}", True)


def _layout(leaf: Leaf, candidate: _Candidate, said: str, confirmed: bool) -> Layout:
    whole = candidate.index == _all(leaf.shape)
    if whole and confirmed and candidate.source != "user" and "cannot tell" not in said:
        return Layout(candidate.index, "replicated", None, True)
    what = "the whole parameter" if whole else candidate.words
    source = "values" if said == "as its values show" and candidate.source == "shape" else candidate.source
    return Layout(candidate.index, source, f"{leaf.kind} {leaf.name}: rank r holds {what} ({said})", confirmed)
