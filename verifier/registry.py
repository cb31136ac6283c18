"""The op registry: one ``OpRule`` per IR op, registered by the modules in ``verifier/rules``.

Each rule carries
* ``shape``: global output shapes from global input shapes (well-formedness);
* ``placement``: the sharding rule for ONE mesh dim; ``verifier/placement_check.py`` applies
  it to every mesh dim of an N-D mesh (the way DTensor writes op strategies);
* ``evaluate``: the local semantics on one rank, written once against a backend
  (``verifier/backends.py``) so it is both the concrete evaluator and the Z3 encoding;
* for collectives, ``evaluate_group``: the semantics over the ranks of one mesh-dim group.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .ir import Mesh
from .placements import Partial, Placement, Replicate, Shard, Varying

Shape = tuple[int, ...]


class PlacementError(Exception):
    """An op consumed a placement it cannot: the message says why in the user's terms."""


class ShapeError(Exception):
    """Operand shapes do not fit the op."""


@dataclass(frozen=True)
class PlacementContext:
    mesh_dim: str
    size: int
    shapes: tuple[Shape, ...]
    attrs: dict[str, Any]
    op: str


@dataclass(frozen=True)
class RankContext:
    """What a local op may know about where it runs."""

    mesh: Mesh
    coords: dict[str, int]

    def size(self, mesh_dim: str) -> int:
        return self.mesh.size(mesh_dim)


@dataclass(frozen=True)
class OpRule:
    name: str
    shape: Callable[[Sequence[Shape], dict[str, Any], Mesh], list[Shape]]
    placement: Callable[[Sequence[Placement], PlacementContext], list[Placement]]
    evaluate: Callable[..., list[Any]] | None = None
    evaluate_group: Callable[..., list[list[Any]]] | None = None
    arity: tuple[int, int] = (1, 1)
    required_attrs: tuple[str, ...] = ()
    uses_coords: bool = False  # reads the rank's coordinates, so ranks with equal inputs may differ

    @property
    def is_collective(self) -> bool:
        return self.evaluate_group is not None


REGISTRY: dict[str, OpRule] = {}


def register(rule: OpRule) -> OpRule:
    if rule.name in REGISTRY:
        raise ValueError(f"op {rule.name} registered twice")
    REGISTRY[rule.name] = rule
    return rule


def get_rule(name: str) -> OpRule | None:
    _load_rules()
    return REGISTRY.get(name)


def all_rules() -> dict[str, OpRule]:
    _load_rules()
    return REGISTRY


def _load_rules() -> None:
    if not REGISTRY:
        from . import rules  # noqa: F401  (registers every op on import)


# --- helpers shared by the rule modules ---------------------------------------------------

def norm_dim(dim: int, ndim: int) -> int:
    if not -ndim <= dim < max(ndim, 1):
        raise ShapeError(f"dim {dim} out of range for a {ndim}-d tensor")
    return dim % ndim if ndim else 0


def any_varying(placements: Sequence[Placement]) -> bool:
    return any(isinstance(p, Varying) for p in placements)


def describe(placement: Placement, mesh_dim: str) -> str:
    if isinstance(placement, Partial):
        return f"a partial {placement.op} over {mesh_dim}"
    if isinstance(placement, Shard):
        return f"sharded along dim {placement.dim} over {mesh_dim}"
    if isinstance(placement, Replicate):
        return f"replicated over {mesh_dim}"
    return f"rank-dependent over {mesh_dim}"
