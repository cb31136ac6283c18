"""Moving between global tensors and the ranks' local tensors, per placement.

``distribute`` gives each rank its local piece of a global tensor (DTensor semantics: mesh
dims are applied in order, each ``Shard(d)`` splitting the current piece again);
``reassemble`` inverts it and also returns the agreements a ``Replicate`` placement demands
(every rank of the group must hold the same value).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np

from .ir import Mesh
from .placements import Partial, Placement, Replicate, Shard
from .rules.collectives import combine


class NotDistributable(Exception):
    """A placement we cannot split or join (rank-varying, partial max inputs)."""


def distribute(value: Any, placements: tuple[Placement, ...], mesh: Mesh,
               fresh: Callable[[tuple[int, ...], str], Any]) -> list[Any]:
    """Local values of every rank, in row-major rank order.

    ``fresh(shape, tag)`` supplies free values for the extra degrees of freedom of a partial
    placement: ranks 1.. hold arbitrary values and rank 0 the remainder, so that every
    decomposition of the global value is covered.
    """
    pieces: dict[tuple[int, ...], Any] = {(): value}
    for (mesh_dim, size), placement in zip(mesh.dims, placements or (Replicate(),) * len(mesh.dims)):
        next_pieces: dict[tuple[int, ...], Any] = {}
        for prefix, piece in pieces.items():
            if isinstance(placement, Shard):
                dim = placement.dim % np.ndim(piece)
                if np.shape(piece)[dim] % size:
                    raise NotDistributable(f"dim {dim} of size {np.shape(piece)[dim]} does not split {size} ways")
                for c, part in enumerate(np.split(piece, size, axis=dim)):
                    next_pieces[prefix + (c,)] = part
            elif isinstance(placement, Replicate):
                for c in range(size):
                    next_pieces[prefix + (c,)] = piece
            elif isinstance(placement, Partial) and placement.op in ("sum", "avg"):
                others = [fresh(np.shape(piece), f"{mesh_dim}{'_'.join(map(str, prefix))}_{c}") for c in range(1, size)]
                total = piece * size if placement.op == "avg" else piece
                first = total
                for other in others:
                    first = first - other
                for c, part in enumerate([first] + others):
                    next_pieces[prefix + (c,)] = part
            else:
                raise NotDistributable(f"cannot split a value placed {placement} over {mesh_dim}")
        pieces = next_pieces
    return [pieces[coords] for coords in itertools.product(*(range(s) for _, s in mesh.dims))]


def reassemble(values: list[Any], placements: tuple[Placement, ...], mesh: Mesh, xp: Any
               ) -> tuple[Any, list[tuple[Any, Any, int, int]]]:
    """The global value the ranks' values stand for, plus (a, b, rank_a, rank_b) agreements."""
    coords = list(itertools.product(*(range(s) for _, s in mesh.dims)))
    pieces: dict[tuple[int, ...], tuple[Any, int]] = {c: (v, i) for i, (c, v) in enumerate(zip(coords, values))}
    agreements = []
    for position in reversed(range(len(mesh.dims))):
        size = mesh.dims[position][1]
        placement = (placements or (Replicate(),) * len(mesh.dims))[position]
        merged: dict[tuple[int, ...], tuple[Any, int]] = {}
        for prefix in {c[:position] for c in pieces}:
            group = [pieces[prefix + (c,)] for c in range(size)]
            if isinstance(placement, Shard):
                merged[prefix] = (np.concatenate([v for v, _ in group], axis=placement.dim % np.ndim(group[0][0])),
                                  group[0][1])
            elif isinstance(placement, Replicate):
                for value, rank in group[1:]:
                    agreements.append((value, group[0][0], rank, group[0][1]))
                merged[prefix] = group[0]
            elif isinstance(placement, Partial):
                merged[prefix] = (combine(xp, [v for v, _ in group], placement.op), group[0][1])
            else:
                raise NotDistributable(f"no global value for a placement {placement}")
        pieces = merged
    return pieces[()][0], agreements
