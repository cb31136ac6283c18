"""The alpha-beta communication cost of a program: what ranks fixes.

Each collective over a mesh dim of ``n`` ranks costs ``alpha * steps + beta * bytes``:

* ``bytes`` is what one rank sends: the size of its local operand (the value's global shape
  x dtype size, divided by the mesh dims it is sharded over) times the collective's ring
  factor — all_reduce 2(n-1)/n, reduce_scatter and all_to_all (n-1)/n, all_gather (n-1)
  (it sends its whole block to n-1 peers, i.e. (n-1)/n of the gathered result), broadcast 1;
* ``steps`` is the latency-optimal number of rounds, ceil(log2 n) (recursive doubling /
  halving, Bruck), so an all-reduce is never dearer than the reduce-scatter + all-gather it
  can be built from, and is cheaper once the launch of the second collective is counted;
* ops that a fix adds around a collective (the local sum after gathering partial values)
  cost ``gamma`` per byte they read: that is what makes "all-gather the partials and add
  them up locally" dearer than an all-reduce even on 2 ranks, where both send the same
  bytes.

Costs are in microseconds of one training step with the defaults (about NVLink-class
bandwidth); only their order matters for ranking.
"""
from __future__ import annotations

import math

import numpy as np
from dataclasses import dataclass
from typing import Callable

from ..ir import Program
from ..placements import Placement, Shard

DTYPE_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "fp8": 1, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1,
               "bool": 1}


@dataclass(frozen=True)
class CollectiveCost:
    """How one collective kind scales with the group size ``n``."""

    ring_factor: Callable[[int], float]
    steps: Callable[[int], int]


def _log_steps(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 0


COLLECTIVES: dict[str, CollectiveCost] = {
    "all_reduce": CollectiveCost(lambda n: 2 * (n - 1) / n, _log_steps),
    "reduce_scatter": CollectiveCost(lambda n: (n - 1) / n, _log_steps),
    "all_gather": CollectiveCost(lambda n: float(n - 1), _log_steps),
    "all_to_all": CollectiveCost(lambda n: (n - 1) / n, _log_steps),
    "broadcast": CollectiveCost(lambda n: 1.0 if n > 1 else 0.0, _log_steps),
    "reduce": CollectiveCost(lambda n: (n - 1) / n, _log_steps),
    "gather": CollectiveCost(lambda n: (n - 1) / n, _log_steps),
    "scatter": CollectiveCost(lambda n: (n - 1) / n, _log_steps),
    "vocab_parallel_embedding": CollectiveCost(lambda n: 2 * (n - 1) / n, _log_steps),
    "vocab_parallel_cross_entropy": CollectiveCost(lambda n: 2 * (n - 1) / n, _log_steps),
}

LOCAL_REDUCTIONS = ("sum", "mean", "amax")


@dataclass(frozen=True)
class CostModel:
    alpha_us: float = 5.0  # latency per communication round
    beta_us_per_byte: float = 1.0 / 100e3  # 100 GB/s per link
    gamma_us_per_byte: float = 1.0 / 1000e3  # 1 TB/s memory bandwidth for added local reductions

    def collective(self, kind: str, group_size: int, local_bytes: float) -> float:
        spec = COLLECTIVES.get(kind)
        if spec is None or group_size <= 1:
            return 0.0
        return self.alpha_us * spec.steps(group_size) + self.beta_us_per_byte * spec.ring_factor(group_size) * local_bytes


def dtype_bytes(dtype: str | None) -> int:
    return DTYPE_BYTES.get(str(dtype or "f32"), 4)


def local_elements(shape: tuple[int, ...], placements: tuple[Placement, ...], mesh_sizes: list[int]) -> float:
    """Elements a rank holds: the global size divided by every mesh dim that shards it."""
    count = float(math.prod(shape)) if shape else 1.0
    for placement, size in zip(placements, mesh_sizes):
        if isinstance(placement, Shard):
            count /= size
    return count


def program_cost(program: Program, shapes: dict[str, tuple[int, ...]],
                 placements: dict[str, tuple[Placement, ...]], dtypes: dict[str, str],
                 model: CostModel = CostModel(), added_local: frozenset[str] = frozenset()) -> float:
    """Total cost of the program's collectives (+ the local reductions a fix added).

    ``shapes`` are global shapes at the program's real sizes; ``added_local`` names the
    results of local ops a fix inserted (only their reductions are charged).
    """
    sizes = [size for _, size in program.mesh.dims]
    producers = {name: op for op in program.ops for name in op.results}

    def local_bytes(name: str) -> float:
        elements = local_elements(shapes[name], placements.get(name, ()), sizes)
        op = producers.get(name)
        if op is not None and op.kind == "all_gather" and op.args and op.attr("mesh_dim") in program.mesh.names:
            # gathering values that are not shards (partial sums) stacks n full copies
            position = program.mesh.index(str(op.attr("mesh_dim")))
            if not isinstance(placements.get(op.args[0], (Shard(0),) * len(sizes))[position], Shard):
                elements *= sizes[position]
        return elements * dtype_bytes(dtypes.get(name))

    total = 0.0
    for op in program.ops:
        if not op.args or op.args[0] not in shapes:
            continue
        if op.kind in COLLECTIVES:
            group = program.mesh.size(str(op.attr("mesh_dim"))) if op.attr("mesh_dim") in program.mesh.names else 1
            total += model.collective(op.kind, group, local_bytes(op.args[0]))
        elif op.kind in LOCAL_REDUCTIONS and op.results and op.results[0] in added_local:
            total += model.gamma_us_per_byte * local_bytes(op.args[0])
    return total


def traced_cost(program, model: CostModel = CostModel(), seed: int = 0) -> float:
    """The cost of the collectives one rank of a traced run issues (``verifier.traced_ir.TracedProgram``).

    The recording has no static shapes: the ranks are run once in NumPy on seeded inputs and each
    collective is charged for the operand it really got; the group is the op's own
    (``attrs["group"]``).  Bytes use the dtype of the program's floating inputs.
    """
    from ..backends import NumpyBackend
    from ..equivalence import random_values
    from ..traced_run import RunError, new_cache, run

    def kind_of(spec) -> str:
        dtype = str(spec.dtype).replace("torch.", "")
        return "bool" if dtype == "bool" else "int" if dtype.startswith(("i", "u", "long")) else "float"

    leaves = {**random_values(program.inputs, seed, kind_of), **program.pinned}
    try:
        env = run(program.ranks, leaves, NumpyBackend(), new_cache())[0]
    except (RunError, ValueError, KeyError, TypeError, IndexError):
        return 0.0
    floats = [str(spec.dtype) for spec in program.inputs if kind_of(spec) == "float"]
    width = {"float64": 8, "float16": 2, "bfloat16": 2}.get(floats[0].replace("torch.", ""), 4) if floats else 4
    total = 0.0
    for op in program.ranks[0]:
        if op.kind not in COLLECTIVES or not op.args or op.args[0] not in env:
            continue
        group = op.attr("group")
        size = len(group) if isinstance(group, (tuple, list)) else program.world
        elements = float(np.size(env[op.args[0]]))
        total += model.collective(op.kind, size, elements * width)
    return total
