"""Seeded faults for plans: one bug, described by a short spec, put into the generated program.

* ``drop-allreduce:layer=97`` — layer 97's MLP output reduction (the reduce-scatter that
  replaces the all-reduce under sequence parallelism; the shared expert's in a MoE layer)
  is skipped on ONE tensor-parallel group: the one at the last ``dp`` coordinate (and
  ``ep=0``) of the layer's pipeline stage.  ``,dp=N`` / ``,ep=N`` pick another group.
  Written as ``when="not (dp == N)"`` on the op: rank-dependent code on an outer mesh dim.
* ``swap-send:stage=3`` — the first point-to-point send of pipeline stage 3 goes to its
  other neighbour (activations backwards, gradients forwards; around the ring at the
  ends).
* ``double-divide:grad=layers.5.attention.wq`` — that gradient is divided by the
  data-parallel world size once more after its synchronisation (averaged twice).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..temporal import Schedule

if TYPE_CHECKING:
    from .plans import Plan

KINDS = ("drop-allreduce", "swap-send", "double-divide")


class FaultError(ValueError):
    """A fault spec that does not parse or does not fit the plan."""


@dataclass(frozen=True)
class Fault:
    kind: str = ""
    layer: int | None = None
    group: tuple[tuple[str, int], ...] = ()   # outer coordinates of the faulty tp group
    stage: int | None = None
    grad: str | None = None
    spec: str = ""

    def reduction_guard(self, layer: int) -> str | None:
        """``when=`` for the MLP reduction of ``layer``: None = runs everywhere, "" = nowhere."""
        if self.kind != "drop-allreduce" or layer != self.layer:
            return None
        if not self.group:
            return ""
        return "not (" + " and ".join(f"{dim} == {value}" for dim, value in self.group) + ")"

    def divides_twice(self, path: str) -> bool:
        return self.kind == "double-divide" and path == self.grad

    def apply_to_schedule(self, schedule: Schedule) -> Schedule:
        if self.kind != "swap-send":
            return schedule
        rank = self.stage
        actions = list(schedule.ranks[rank])
        for index, action in enumerate(actions):
            if action.comm is not None and action.comm.direction == "send":
                ring = schedule.stages
                forward = action.comm.payload == "act"
                other = (rank - 1) % ring if forward else (rank + 1) % ring
                if other == action.peer:
                    other = rank  # two stages: the only other choice is the sender itself
                actions[index] = replace(action, peer=other)
                return schedule.with_rank(rank, actions)
        raise FaultError(f"pipeline stage {rank} sends nothing to swap")


NO_FAULT = Fault()


def parse_fault(spec: str | None, plan: "Plan") -> Fault:
    """``"drop-allreduce:layer=97"`` -> a ``Fault`` resolved against ``plan``."""
    if not spec:
        return NO_FAULT
    kind, _, rest = spec.partition(":")
    if kind not in KINDS:
        raise FaultError(f"unknown fault {kind!r}; expected one of {', '.join(KINDS)}")
    args: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise FaultError(f"expected key=value in {spec!r}, got {item!r}")
        args[key.strip()] = value.strip()
    if kind == "drop-allreduce":
        layer = _int(args, "layer", spec)
        if not 0 <= layer < plan.model.layers:
            raise FaultError(f"layer {layer} is outside 0..{plan.model.layers - 1}")
        group = []
        for dim, size in plan.mesh.dims:
            if dim in ("pp", "tp") or size == 1 and dim not in args:
                continue
            value = int(args[dim]) if dim in args else (size - 1 if dim == "dp" else 0)
            if not 0 <= value < size:
                raise FaultError(f"{dim}={value} is outside 0..{size - 1}")
            group.append((dim, value))
        return Fault(kind, layer=layer, group=tuple(group), spec=spec)
    if kind == "swap-send":
        stage = _int(args, "stage", spec)
        if plan.parallel.pp < 2:
            raise FaultError(f"plan {plan.name} has no pipeline (pp=1): nothing to send")
        if not 0 <= stage < plan.parallel.pp:
            raise FaultError(f"stage {stage} is outside 0..{plan.parallel.pp - 1}")
        return Fault(kind, stage=stage, spec=spec)
    grad = args.get("grad")
    if not grad:
        raise FaultError(f"expected grad=NAME in {spec!r} (e.g. grad=layers.0.mlp.wd)")
    return Fault(kind, grad=grad, spec=spec)


def _int(args: dict[str, str], key: str, spec: str) -> int:
    if key not in args or not args[key].lstrip("-").isdigit():
        raise FaultError(f"expected {key}=N in {spec!r}")
    return int(args[key])

