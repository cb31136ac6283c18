"""Ranks of a mesh: coordinates, global rank numbers and process groups.

Global ranks are numbered major-to-minor over the mesh dims (``dp=2, tp=4``: rank
``dp*4 + tp``), the layout ``init_device_mesh`` uses.  A group over mesh dims ``D`` is
the set of ranks that agree on every coordinate outside ``D``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..ir import Mesh


@dataclass(frozen=True)
class Group:
    """A process group: the mesh dims it spans and its member ranks (ascending)."""

    dims: tuple[str, ...]
    members: tuple[int, ...]

    def __str__(self) -> str:
        return f"{'x'.join(self.dims) or 'world'} group {{{', '.join(map(str, self.members))}}}"


@dataclass(frozen=True)
class RankSpace:
    """Every rank of one mesh with its coordinates, and the groups collectives run over."""

    mesh: Mesh
    _groups: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def world(self) -> int:
        return self.mesh.world

    def coords(self, rank: int) -> dict[str, int]:
        coords: dict[str, int] = {}
        for name, size in reversed(self.mesh.dims):
            coords[name] = rank % size
            rank //= size
        return {name: coords[name] for name in self.mesh.names}

    def rank_of(self, coords: dict[str, int]) -> int:
        rank = 0
        for name, size in self.mesh.dims:
            rank = rank * size + coords[name]
        return rank

    def env(self, rank: int) -> dict[str, int]:
        """Names a ``when=``/``peer=`` expression may use on this rank."""
        env = self.coords(rank)
        env.update({f"{name}_size": size for name, size in self.mesh.dims})
        env.update(rank=rank, world=self.world)
        return env

    def group(self, rank: int, dims: tuple[str, ...]) -> Group:
        """``rank``'s group over mesh dims ``dims``; built once per group, then shared."""
        base = self.coords(rank)
        key = (dims, tuple(value for name, value in base.items() if name not in dims))
        group = self._groups.get(key)
        if group is None:
            members = []
            for values in itertools.product(*(range(self.mesh.size(name)) for name in dims)):
                coords = dict(base)
                coords.update(zip(dims, values))
                members.append(self.rank_of(coords))
            group = self._groups[key] = Group(dims, tuple(sorted(members)))
        return group

    def peer(self, rank: int, coordinate: int, dims: tuple[str, ...]) -> int | None:
        """Global rank of ``coordinate`` along mesh dim ``dims`` in ``rank``'s group.

        With no mesh dim the coordinate is a global rank, as for ``dist.send(dst=...)`` on
        the default group.  None when the coordinate falls outside the group.
        """
        if len(dims) != 1:
            return coordinate if 0 <= coordinate < self.world else None
        if not 0 <= coordinate < self.mesh.size(dims[0]):
            return None
        coords = self.coords(rank)
        coords[dims[0]] = coordinate
        return self.rank_of(coords)
