"""Recorded runs -> ``verifier.traced_ir.TracedProgram``.

The reference run's leaves are the program's inputs.  Each rank's op list starts with the
pieces of the leaves it holds (``aten.slice.Tensor`` per sharded dim, ``aten.alias.default``
for a replicated copy; ``attrs["layout_source"]`` says where the layout came from), then its
recorded ops.  Outputs and gradients are matched by position / leaf name; a value a run never
produced (a gradient that stayed ``None``) is zeros of its shape.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from verifier.ir import Op, Span
from verifier.traced_ir import Comparison, TracedProgram

from .correspondence import LayoutError, layout_of
from .recorder import Problem
from .run import Leaf, RunResult


@dataclass(frozen=True)
class TraceFailure:
    """Why there is no program: "unsupported", "input-error", "cannot-run" (use the static frontend),
    "violation" (the ranks' values cannot equal the single-device value: wrong shapes), "timeout", "internal"."""

    kind: str
    message: str
    line: int | None = None


def to_program(reference: RunResult, ranks: list[RunResult], user_layouts: dict[str, str],
               source: str | None) -> TracedProgram | TraceFailure:
    for run in [reference, *ranks]:
        if run.recording.problems:
            return _failure(run.recording.problems[0], run)
    world = len(ranks)
    inputs = {spec.name: spec for spec in reference.recording.leaves}
    assumptions: list[str] = []
    rank_ops: list[tuple[Op, ...]] = []
    regions_by_leaf: dict[str, list] = {}
    for run in ranks:
        prefix: list[Op] = []
        for spec in run.recording.leaves:
            known = inputs.get(spec.name)
            if known is None or tuple(known.shape) != tuple(spec.shape):
                return TraceFailure("unsupported", f"rank {run.rank} draws or holds {spec.name} with shape "
                                                   f"{tuple(spec.shape)}, which the single-device run does not "
                                                   f"(shape {None if known is None else tuple(known.shape)}): "
                                                   f"no correspondence", spec.span.line)
            ours, theirs = run.recording.fingerprints.get(spec.name), reference.recording.fingerprints.get(spec.name)
            if ours != theirs:
                return TraceFailure("unsupported", f"the constant tensor {spec.name} has different values on rank "
                                                   f"{run.rank} and on one device", spec.span.line)
        for leaf in run.leaves:
            if leaf.local == leaf.name:
                continue
            known = inputs.get(leaf.name)
            if known is None:
                return TraceFailure("unsupported", f"rank {run.rank} holds {leaf.kind} {leaf.name}, which the "
                                                   f"single-device run does not have", leaf.span.line)
            leaf = replace(leaf, shape=tuple(int(d) for d in known.shape))
            try:
                layout = layout_of(leaf, run.rank, world, user_layouts)
            except LayoutError as error:
                return TraceFailure("unsupported", str(error), leaf.span.line)
            regions_by_leaf.setdefault(leaf.name, []).append(layout.region)
            if layout.sentence and layout.sentence not in assumptions:
                assumptions.append(layout.sentence)
            prefix.extend(_piece_ops(leaf, layout.region, layout.source))
        rank_ops.append(tuple(prefix) + tuple(run.recording.ops))
    reference_ops = list(reference.recording.ops)
    comparisons = []
    extra_rank_ops: list[list[Op]] = [[] for _ in ranks]
    sliced = _read_only_in_slices(reference, ranks)
    for value in reference.values:
        if value.kind == "gradient" and value.key in sliced:
            sentence = (f"gradient of {value.key} is not compared: it was not created trainable and each rank "
                        f"reads only a slice of it (a sharded weight passed whole)")
            assumptions.append(sentence)
            continue
        per_rank, regions = [], []
        reference_name = value.name
        if reference_name is None:
            reference_name = f"zeros_{_safe(value.key)}"
            reference_ops.append(Op((reference_name,), "aten.zeros.default", (), {"size": list(value.shape)},
                                    value.span))
        for index, run in enumerate(ranks):
            theirs = next((v for v in run.values if v.key == value.key), None)
            if theirs is None:
                return TraceFailure("unsupported", f"rank {run.rank} does not produce {value.label}", value.span.line)
            region = theirs.region
            if region is None:
                region = _infer_region(value.shape, theirs.shape, run.rank, world)
                if region is None and _cannot_be_a_piece(value.shape, theirs.shape):
                    return TraceFailure("violation", f"{value.label} has shape {tuple(theirs.shape)} on rank "
                                                     f"{run.rank} but {tuple(value.shape)} on one device: no piece "
                                                     f"of the single-device value has that shape", value.span.line)
                if region is None:
                    return TraceFailure("unsupported", f"{value.label}: rank {run.rank} holds shape "
                                                       f"{theirs.shape} of shape {value.shape}; which piece it is "
                                                       f"cannot be told", value.span.line)
                if region != tuple((0, n) for n in value.shape) and value.kind == "output":
                    sentence = (f"{value.label}: each rank returns the contiguous chunk of the dim that shrank "
                                f"by the world size")
                    if sentence not in assumptions:
                        assumptions.append(sentence)
            name = theirs.name
            if name is None:
                name = f"zeros_{_safe(value.key)}"
                extent = [stop - start for start, stop in region]
                extra_rank_ops[index].append(Op((name,), "aten.zeros.default", (), {"size": extent}, value.span))
            per_rank.append(name)
            regions.append(region)
        comparisons.append(Comparison(value.label, value.kind, reference_name, tuple(per_rank), tuple(regions),
                                      value.span))
    ranks_final = tuple(ops + tuple(extra) for ops, extra in zip(rank_ops, extra_rank_ops))
    for run in [reference, *ranks]:
        for sentence in run.assumptions + run.recording.assumptions:
            if sentence not in assumptions:
                assumptions.append(sentence)
    return TracedProgram(world=world, mesh=dict(ranks[0].mesh) if ranks else {"tp": 1},
                         inputs=tuple(reference.recording.leaves), reference=tuple(reference_ops),
                         ranks=ranks_final, comparisons=tuple(comparisons), assumptions=tuple(assumptions),
                         passes=reference.passes, source=source)


_SLICING = {"aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default", "aten.slice.Tensor",
            "aten.narrow.default", "aten.select.int", "aten.unbind.int"}


def _read_only_in_slices(reference: RunResult, ranks: list[RunResult]) -> set[str]:
    """Inputs made trainable by the tool (not by the user) that every rank reads only through slices."""
    candidates = {leaf.name for leaf in reference.leaves if leaf.kind == "input" and not leaf.requires_grad}
    out = set()
    for name in candidates:
        uses = [op.kind for run in ranks for op in run.recording.ops if name in op.args]
        if uses and all(kind in _SLICING for kind in uses):
            out.add(name)
    return out


def _failure(problem: Problem, run: RunResult) -> TraceFailure:
    where = "on one device" if run.world == 1 else f"on rank {run.rank} of {run.world}"
    return TraceFailure("unsupported", f"{problem.message} ({where})", problem.span.line)


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in key)


def _cannot_be_a_piece(global_shape, local_shape) -> bool:
    return len(global_shape) != len(local_shape) or any(int(n) > int(g) for g, n in zip(global_shape, local_shape))


def _infer_region(global_shape, local_shape, rank: int, world: int):
    if len(global_shape) != len(local_shape):
        return None
    if tuple(global_shape) == tuple(local_shape):
        return tuple((0, int(n)) for n in global_shape)
    shrunk = [d for d, (g, n) in enumerate(zip(global_shape, local_shape)) if g != n]
    if len(shrunk) != 1 or int(local_shape[shrunk[0]]) * world != int(global_shape[shrunk[0]]):
        return None
    d, size = shrunk[0], int(local_shape[shrunk[0]])
    return tuple((rank * size, (rank + 1) * size) if i == d else (0, int(n)) for i, n in enumerate(global_shape))


def _piece_ops(leaf: Leaf, region, source: str) -> list[Op]:
    """The ops that cut the rank's piece out of the reference leaf."""
    span = leaf.span
    cut = [(d, start, stop) for d, (start, stop) in enumerate(region) if (start, stop) != (0, leaf.shape[d])]
    if not cut:
        return [Op((leaf.local,), "aten.alias.default", (leaf.name,), {"layout_source": source}, span)]
    ops, current = [], leaf.name
    for index, (d, start, stop) in enumerate(cut):
        name = leaf.local if index == len(cut) - 1 else f"{leaf.local}#{index}"
        ops.append(Op((name,), "aten.slice.Tensor", (current,),
                      {"dim": d, "start": start, "end": stop, "step": 1, "layout_source": source}, span))
        current = name
    return ops
