"""Recorded runs -> ``verifier.traced_ir.TracedProgram``.

The reference run's leaves are the program's inputs.  Each rank's op list starts with the
pieces of the leaves it holds (``aten.slice.Tensor`` per sharded dim, ``aten.alias.default``
for a replicated copy; ``attrs["layout_source"]`` says where the layout came from), then its
recorded ops.  Outputs and gradients are matched by position / leaf name; a value a run never
produced (a gradient that stayed ``None``) is zeros of its shape.
"""
from __future__ import annotations

from dataclasses import replace

from typing import Any

from verifier.ir import Op, Span, TensorSpec
from verifier.traced_ir import Comparison, TracedProgram

from .correspondence import Layout, LayoutError, box, layout_of
from .failure import TraceFailure
from .recorder import Problem
from .run import Leaf, RunResult
from .steering import pinned_selections


def to_program(reference: RunResult, ranks: list[RunResult], user_layouts: dict[str, str],
               source: str | None) -> TracedProgram | TraceFailure:
    for run in [reference, *ranks]:
        if run.recording.problems:
            return _failure(run.recording.problems[0], run)
    world = len(ranks)
    inputs = {spec.name: spec for spec in reference.recording.leaves}
    rank_ops: list[tuple[Op, ...]] = []
    own_draws: list[TensorSpec] = []            # draws that gave a rank other numbers than one device
    layouts = _layouts(reference, ranks, user_layouts)
    if isinstance(layouts, TraceFailure):
        return layouts
    unconfirmed: list[str] = []
    renamed_selections, selected, pinned, assumptions = pinned_selections(reference.recording)
    for run in ranks:
        prefix: list[Op] = []
        renamed, leaves, numbers, sentences = pinned_selections(run.recording, f"@rank{run.rank}")
        selected += leaves
        pinned.update(numbers)
        assumptions += [sentence for sentence in sentences if sentence not in assumptions]
        for spec in run.recording.leaves:
            known = inputs.get(spec.name)
            if known is None or tuple(known.shape) != tuple(spec.shape):
                return TraceFailure("unsupported", f"rank {run.rank} draws or holds {spec.name} with shape "
                                                   f"{tuple(spec.shape)}, which the single-device run does not "
                                                   f"(shape {None if known is None else tuple(known.shape)}): "
                                                   f"no correspondence", spec.span.line)
            ours, theirs = run.recording.fingerprints.get(spec.name), reference.recording.fingerprints.get(spec.name)
            if ours != theirs:
                if spec.name in run.recording.drawn and spec.name in reference.recording.drawn:
                    own = f"{spec.name}@rank{run.rank}"
                    renamed[spec.name] = own
                    own_draws.append(replace(spec, name=own))
                    pinned[spec.name] = reference.recording.drawn[spec.name]
                    pinned[own] = run.recording.drawn[spec.name]
                    sentence = (f"the random draw at line {spec.span.line} gives other numbers on rank {run.rank} "
                                f"than on one device (a seed that depends on the rank?): the rank computes from "
                                f"data of its own; values are compared with the numbers each run really drew")
                    if sentence not in assumptions:
                        assumptions.append(sentence)
                    continue
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
            layout = layouts[(run.rank, leaf.name)]
            if layout.sentence and layout.sentence not in assumptions:
                assumptions.append(layout.sentence)
            if not layout.confirmed and layout.sentence not in unconfirmed:
                unconfirmed.append(layout.sentence)
            prefix.extend(_piece_ops(leaf, layout))
        rank_ops.append(tuple(prefix) + tuple(_renamed(op, renamed) for op in run.recording.ops))
    reference_ops = [_renamed(op, renamed_selections) for op in reference.recording.ops]
    comparisons = []
    extra_rank_ops: list[list[Op]] = [[] for _ in ranks]
    input_names = {leaf.name for leaf in reference.leaves if leaf.kind == "input"}
    for value in reference.values:
        pieces = _input_gradient_pieces(value, ranks) if value.key in input_names else None
        if pieces is not None:
            comparisons += _piecewise_comparisons(value, ranks, pieces, extra_rank_ops)
            several = "blocks" if any(len(blocks) > 1 for blocks in pieces) else "block"
            sentence = (f"{value.label}: each rank reads only its own disjoint {several} of {value.key} (through "
                        f"slices), so torch makes its gradient zero elsewhere; the rank blocks are compared, and "
                        f"together they are the whole gradient (where no rank reads, the single-device gradient "
                        f"must be zero)")
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
            if theirs is None and value.kind == "gradient" and "backward" not in run.passes:
                return TraceFailure("unsupported", f"rank {run.rank} does not produce {value.label}: no output of the "
                                                   f"rank depends on it through autograd, so no backward runs there "
                                                   f"(raw send/recv/broadcast carry no gradient); for forward-only "
                                                   f"code say --no-grad {value.key}", value.span.line)
            if theirs is None:
                return TraceFailure("unsupported", f"rank {run.rank} does not produce {value.label}", value.span.line)
            region = theirs.region
            if region is None and value.kind == "output":   # a stated block: the output is resharded
                region = stated_output_block(value, theirs.shape, user_layouts, run.rank, world)
                if isinstance(region, TraceFailure):
                    return region
            if region is None and value.kind == "output" and tuple(theirs.shape) != tuple(value.shape):
                # a plain tensor returned by a rank is the value itself: a piece of it is not the
                # single-device result (a DTensor output says which piece it is, through its placements)
                return replace(_wrong_output_shape(value, theirs, reference, run, world), rank_ops=tuple(rank_ops),
                               mesh=dict(ranks[0].mesh), shape_of=value.label)
            layout = layouts.get((run.rank, value.key)) if value.kind == "gradient" \
                and not _placed_otherwise(run, value.key, theirs) else None
            if layout is not None:
                region = layout.region   # the parameter's piece (None: not one block; reordered below)
            if region is None and layout is None:
                region = _infer_region(value.shape, theirs.shape, run.rank, world)
                if region is None and _cannot_be_a_piece(value.shape, theirs.shape):
                    return TraceFailure("violation", f"{value.label} has shape {tuple(theirs.shape)} on rank "
                                                     f"{run.rank} but {tuple(value.shape)} on one device: no piece "
                                                     f"of the single-device value has that shape", value.span.line,
                                        shape_of=value.label)
                if region is None and layout is None:
                    return TraceFailure("unsupported", f"{value.label}: rank {run.rank} holds shape "
                                                       f"{theirs.shape} of shape {value.shape}; which piece it is "
                                                       f"cannot be told", value.span.line)
            name = theirs.name
            if name is None:
                name = f"zeros_{_safe(value.key)}"
                extent = [stop - start for start, stop in region]
                extra_rank_ops[index].append(Op((name,), "aten.zeros.default", (), {"size": extent}, value.span))
            per_rank.append(name)
            regions.append(region)
        if any(region is None for region in regions):   # strided pieces: the reference reordered to blocks
            reordered = _reordered(value, reference_name, [layouts[(run.rank, value.key)] for run in ranks])
            if isinstance(reordered, TraceFailure):
                return reordered
            reference_name, regions, order_ops = reordered
            reference_ops.extend(order_ops)
        comparisons.append(Comparison(value.label, value.kind, reference_name, tuple(per_rank), tuple(regions),
                                      value.span))
    ranks_final = tuple(ops + tuple(extra) for ops, extra in zip(rank_ops, extra_rank_ops))
    for run in [reference, *ranks]:
        for sentence in run.assumptions + run.recording.assumptions:
            if sentence not in assumptions:
                assumptions.append(sentence)
    return TracedProgram(world=world, mesh=dict(ranks[0].mesh) if ranks else {"tp": 1},
                         inputs=tuple(reference.recording.leaves) + tuple(own_draws) + tuple(selected),
                         reference=tuple(reference_ops),
                         ranks=ranks_final, comparisons=tuple(comparisons), assumptions=tuple(assumptions),
                         passes=reference.passes, source=source, pinned=pinned,
                         fixed=tuple(spec.name for spec in selected), unconfirmed=tuple(unconfirmed),
                         not_run=dict(reference.not_run), built=tuple(_built_lines(run) for run in ranks),
                         handed_back=tuple(dict(run.recording.handed_back) for run in ranks),
                         forward_handed_back=tuple(dict(run.recording.forward_handed_back) for run in ranks),
                         inputs_as_made=reference.inputs_as_made)


def _renamed(op: Op, names: dict[str, str]) -> Op:
    if not names or not any(arg in names for arg in op.args):
        return op
    return replace(op, args=tuple(names.get(arg, arg) for arg in op.args))


def _input_gradient_pieces(value, ranks: list[RunResult]) -> list | None:
    """Per rank, the blocks of an input the rank reads, when every rank reads the input only through
    slicing ops (in the recorded ops and in torch's autograd graph) and no two blocks overlap; else
    None (every rank's whole gradient is then compared).  The blocks no rank reads go to rank 0.

    Such a rank's gradient is zero outside its blocks (autograd of a slice), so the sum of the rank
    gradients (what a sequence-sharded input's gradient is, or the weights of the experts each rank
    owns) equals the reference exactly when each rank's blocks do, and the reference is zero where no
    rank reads (rank 0's gradient there)."""
    if value.kind != "gradient" or value.name is None:
        return None
    shape = tuple(int(n) for n in value.shape)
    blocks = []
    for run in ranks:
        theirs = next((v for v in run.values if v.key == value.key), None)
        if theirs is None or tuple(theirs.shape) != shape:
            return None
        leaf = next((leaf for leaf in run.leaves if leaf.name == value.key), None)
        if leaf is None or leaf.local != leaf.name or not leaf.read_by_autograd_slices:
            return None
        read = _blocks_read(value.key, run.recording.ops, shape)
        if read is None:
            return None
        blocks.append(read)
    every = [block for read in blocks for block in read]
    disjoint = all(any(a[d][1] <= b[d][0] or b[d][1] <= a[d][0] for d in range(len(shape)))
                   for i, a in enumerate(every) for b in every[i + 1:])
    rest = _unread(every, shape) if disjoint else None
    if rest is None:
        return None
    blocks[0] = blocks[0] + rest
    return blocks


def _unread(blocks: list, shape: tuple[int, ...]) -> list | None:
    """The blocks of ``shape`` outside the disjoint ``blocks``, when the blocks are cut along one dim
    only (else None, unless they cover everything)."""
    volume = lambda b: _product(stop - start for start, stop in b)
    if sum(volume(b) for b in blocks) == _product(shape):
        return []
    cut = {d for b in blocks for d, (start, stop) in enumerate(b) if (start, stop) != (0, shape[d])}
    if len(cut) != 1:
        return None
    (dim,) = cut
    rest, start = [], 0
    for low, high in sorted((b[dim] for b in blocks)) + [(shape[dim], shape[dim])]:
        if start < low:
            rest.append(tuple((start, low) if d == dim else (0, n) for d, n in enumerate(shape)))
        start = max(start, high)
    return rest


def _blocks_read(name: str, ops, shape) -> list | None:
    """The distinct blocks of ``name`` the ops read, if they read it only through slicing ops (none:
    ``[]``)."""
    used = {arg for op in ops for arg in op.args}
    # the entry was handed a clone of the leaf (run._as_activations): its reads are the leaf's
    aliases = {name} | {result for op in ops if op.kind == "aten.clone.default" and op.args == (name,)
                        for result in op.results}
    blocks: list = []
    for op in ops:
        if not aliases & set(op.args) or (op.kind == "aten.clone.default" and op.args == (name,)):
            continue
        if len(op.args) != 1:
            return None
        regions = _slice_regions(op, shape)
        if regions is None:
            return None
        for result, region in zip(op.results, regions):
            if result in used and region not in blocks:
                blocks.append(region)
    return blocks


def _slice_regions(op: Op, shape) -> list | None:
    """The region of ``shape`` each result of a slicing op covers (None: not understood)."""
    dim = op.attrs.get("dim", 0)
    if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
        return None
    dim %= len(shape)
    size = shape[dim]

    def box(start, stop):
        return tuple((start, stop) if d == dim else (0, n) for d, n in enumerate(shape))

    if op.kind == "aten.split.Tensor" and isinstance(op.attrs.get("split_size"), int) and op.attrs["split_size"] > 0:
        step = op.attrs["split_size"]
        return [box(start, min(start + step, size)) for start in range(0, size, step)]
    if op.kind == "aten.split_with_sizes.default" and isinstance(op.attrs.get("split_sizes"), (list, tuple)):
        starts = [0]
        for n in op.attrs["split_sizes"]:
            starts.append(starts[-1] + int(n))
        return [box(a, b) for a, b in zip(starts, starts[1:])]
    if op.kind == "aten.slice.Tensor" and op.attrs.get("step", 1) == 1:
        start, end = op.attrs.get("start", 0), op.attrs.get("end", size)
        if start is None or end is None or start < 0 or end < 0:
            return None
        return [box(min(start, size), min(end, size))]
    if op.kind == "aten.select.int" and isinstance(op.attrs.get("index"), int) and -size <= op.attrs["index"] < size:
        index = op.attrs["index"] % size   # one index of the dim: the block it reads is one thick
        return [box(index, index + 1)]
    if op.kind == "aten.unbind.int":
        return [box(index, index + 1) for index in range(size)]
    return None


def _piecewise_comparisons(value, ranks: list[RunResult], pieces: list, extra_rank_ops) -> list[Comparison]:
    """Rank r's gradient cut to its blocks, against the reference gradient's blocks: comparison k
    holds each rank's k-th block (one comparison when every rank reads one block)."""
    comparisons = []
    for number in range(max(len(blocks) for blocks in pieces)):
        per_rank, regions = [], []
        for index, (run, blocks) in enumerate(zip(ranks, pieces)):
            if number >= len(blocks):
                per_rank.append(None)
                regions.append(None)
                continue
            block = blocks[number]
            theirs = next(v for v in run.values if v.key == value.key)
            name = f"piece_{_safe(value.key)}" + (f"_{number}" if number else "")
            if theirs.name is None:
                extra_rank_ops[index].append(Op((name,), "aten.zeros.default", (),
                                                {"size": [stop - start for start, stop in block]}, value.span))
            else:
                current = theirs.name
                cut = [(d, start, stop) for d, (start, stop) in enumerate(block)
                       if (start, stop) != (0, value.shape[d])]
                for d, start, stop in cut:
                    target = f"{name}#{d}"
                    extra_rank_ops[index].append(Op((target,), "aten.slice.Tensor", (current,),
                                                    {"dim": d, "start": start, "end": stop, "step": 1,
                                                     "comparison_cut": True}, value.span))
                    current = target
                extra_rank_ops[index].append(Op((name,), "aten.alias.default", (current,),
                                                {"comparison_cut": True}, value.span))
            per_rank.append(name)
            regions.append(block)
        comparisons.append(Comparison(value.label, value.kind, value.name, tuple(per_rank), tuple(regions),
                                      value.span))
    return comparisons


def _product(numbers) -> int:
    out = 1
    for n in numbers:
        out *= int(n)
    return out


def _failure(problem: Problem, run: RunResult) -> TraceFailure:
    where = "on one device" if run.world == 1 else f"on rank {run.rank} of {run.world}"
    return TraceFailure("unsupported", f"{problem.message} ({where})", problem.span.line)


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in key)


def stated_output_block(value, local_shape, statements: dict[str, str], rank: int, world: int):
    """The block of an output a rank returns when ``--expect out=Shard(d)`` states one (``out`` or
    ``out0`` is output 0, ``out1`` output 1): gathering the rank blocks along d gives the
    single-device output, so a reshard (sequence-sharded in, head-sharded out) is checked as one.
    None: no statement (the whole value is expected, or its DTensor placements say which piece)."""
    from .correspondence import rank_block, stated_shard_dim

    index = value.key.split()[1].split("[")[0] if value.key.startswith("output ") else None
    names = [f"out{index}", f"output {index}"] + (["out", "output"] if index == "0" else [])
    stated = next((statements[n] for n in names if n in statements), None)
    dim = stated_shard_dim(stated, len(value.shape))
    if dim is None:
        return None
    size = int(value.shape[dim])
    expected = tuple(size // world if d == dim else int(n) for d, n in enumerate(value.shape))
    if size % world or tuple(int(n) for n in local_shape) != expected:
        return TraceFailure("violation", f"{value.label} has shape {tuple(local_shape)} on rank {rank}, but "
                                         f"--expect {names[0] if index != '0' else 'out'}={stated} says each rank "
                                         f"returns its block of dim {dim} of the single-device shape "
                                         f"{tuple(value.shape)}, shape {expected}", value.span.line)
    return rank_block(tuple(value.shape), dim, rank, world)


def _cannot_be_a_piece(global_shape, local_shape) -> bool:
    return len(global_shape) != len(local_shape) or any(int(n) > int(g) for g, n in zip(global_shape, local_shape))


def _placed_otherwise(run: RunResult, key: str, gradient: Value) -> bool:
    """A DTensor gradient whose own placements give another piece than its parameter's (DTensor's
    backward may leave a ``Shard(1)`` weight's gradient ``Replicate``): the gradient's placements
    say which piece its local tensor is, not the parameter's layout."""
    leaf = next((leaf for leaf in run.leaves if leaf.name == key), None)
    return gradient.region is not None and leaf is not None and leaf.region is not None \
        and tuple(gradient.region) != tuple(leaf.region)


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


def _wrong_output_shape(value, theirs, reference: RunResult, run: RunResult, world: int) -> TraceFailure:
    """A rank returns an output of another shape: a violation, named where its shape stopped being a
    block of the single device's value (``shape_origin``) when that is another line than the return."""
    from .shape_origin import gathered_whole, located, where_output_shape, where_pieces_lost

    message = (f"{value.label} has shape {tuple(theirs.shape)} on rank {run.rank} but {tuple(value.shape)} on one "
               f"device: {_shape_mismatch(value.shape, theirs.shape, world)}")
    made = where_output_shape(reference.recording, run.recording, theirs.name) if theirs.name is not None else None
    origin = located(made, value.span.line)
    lost = located(where_pieces_lost(reference.recording, run.recording, theirs.name, world), value.span.line) \
        if origin is None and theirs.name is not None else None
    if lost is not None:
        line, file, where = lost
        return TraceFailure("violation", f"{message}; the ranks' pieces together stop holding the single device's "
                                         f"value at {where}, which cuts a piece again", line, file=file)
    longer = len(theirs.shape) == len(value.shape) and any(int(m) > int(t) for m, t in zip(theirs.shape, value.shape))
    whole = gathered_whole(reference.recording, run.recording, theirs.name) if longer and theirs.name else None
    if whole is not None and (origin is None or whole[0] is made):
        gather, line, variable = whole
        at_line, at_file = gather.span.moved_to(line).place()
        return TraceFailure("violation", f"{message}; {gather.kind} ({gather.span.where()}) gathers a value every rank "
                                         f"holds whole, as one device does: it comes from {variable}, which line {line} "
                                         f"bound to a value made before it, where a scatter or reduce-scatter belongs",
                            at_line, file=at_file)
    if origin is None:
        rebound = _returned_as_bound(theirs, run)
        if rebound is not None:
            variable, line = rebound
            return TraceFailure("violation", f"{message}; {theirs.span.where()} returns {variable}, which holds this "
                                             f"piece since the line that bound it, after which a collective belongs "
                                             f"(line {line})", line)
        built = _built_by_layer(theirs, run)
        if built is not None:
            return TraceFailure("violation", f"{message}; the installed module built at line {built} made it: its "
                                             f"flags or parallel style choose that layout", value.span.line,
                                repair_line=built)
        return TraceFailure("violation", message, value.span.line)
    line, file, where = origin
    return TraceFailure("violation", f"{message}; its shape stops being a block of the single device's value at "
                                     f"{where}", line, file=file)


def _built_lines(run: RunResult) -> dict[str, int]:
    """Value name -> the line that built the installed module in whose forward the rank made it."""
    from .module_lines import innermost

    ranges, built = run.recording.module_lines, {}
    if ranges:
        for position, op in enumerate(run.recording.ops):
            line = innermost(ranges, position)
            if line is not None:
                built.update(dict.fromkeys(op.results, line))
    return built


def _built_by_layer(value, run: RunResult) -> int | None:
    """The line that built the installed module (a layer given a parallel style, or built with layout flags)
    in whose forward the rank's output was made, through the views and copies after it (``module_lines``)."""
    from .module_lines import innermost

    ranges = run.recording.module_lines
    if not ranges or value.name is None:
        return None
    ops = run.recording.ops
    producer = {result: position for position, op in enumerate(ops) for result in op.results}
    position = producer.get(value.name)
    while position is not None:
        line = innermost(ranges, position)
        if line is not None:
            return line
        op = ops[position]
        if not op.kind.startswith(_PASSING) or not op.args:
            return None
        position = producer.get(op.args[0])
    return None


# ops that hand their one operand on unchanged in layout: a value made in a layer and then viewed, copied
# or detached outside it is still the layer's
_PASSING = ("aten.view.", "aten._unsafe_view.", "aten.alias.", "aten.detach.", "aten.clone.", "aten.contiguous.",
            "aten._to_copy.")


def _returned_as_bound(value, run: RunResult) -> tuple[str, int] | None:
    """The output is returned under a name bound on an earlier line of the entry that made none of it
    (``output = output_parallel`` where a gather was): (that name, that line)."""
    if len(value.span.bound) != 1 or value.span.within is not None:
        return None
    _, variable, line = value.span.bound[0]
    made = next((op for op in run.recording.ops if value.name in op.results), None)
    if made is None or made.span.place() == (line, None):
        return None
    return variable, line


def _piece_ops(leaf: Leaf, layout: Layout) -> list[Op]:
    """The ops that cut the rank's piece out of the reference leaf (its layout's positions)."""
    span, attrs = leaf.span, {"layout_source": layout.source}
    cut = [(d, positions) for d, positions in enumerate(layout.index)
           if list(positions) != list(range(int(leaf.shape[d])))]
    if not cut:
        return [Op((leaf.local,), "aten.alias.default", (leaf.name,), attrs, span)]
    ops, current = [], leaf.name
    for index, (d, positions) in enumerate(cut):
        name = leaf.local if index == len(cut) - 1 else f"{leaf.local}#{index}"
        ops.extend(_gather_ops(current, name, d, positions, attrs, span))
        current = name
    return ops


def _gather_ops(source: str, target: str, dim: int, positions, attrs: dict, span: Span) -> list[Op]:
    """``target`` = the positions of ``source`` along ``dim``, in order: one slice when they are
    evenly spaced, else a slice per run of consecutive positions and a cat."""
    positions = [int(p) for p in positions]
    steps = {b - a for a, b in zip(positions, positions[1:])}
    if len(steps) <= 1 and (not steps or min(steps) >= 1):
        step = steps.pop() if steps else 1
        return [Op((target,), "aten.slice.Tensor", (source,),
                   {"dim": dim, "start": positions[0], "end": positions[-1] + 1, "step": step, **attrs}, span)]
    runs: list[list[int]] = []
    for p in positions:
        if runs and p == runs[-1][1]:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1])
    ops, names = [], []
    for number, (start, stop) in enumerate(runs):
        name = f"{target}#run{number}"
        ops.append(Op((name,), "aten.slice.Tensor", (source,),
                      {"dim": dim, "start": start, "end": stop, "step": 1, **attrs}, span))
        names.append(name)
    ops.append(Op((target,), "aten.cat.default", tuple(names),
                  {"dim": dim, "list_lengths": {"tensors": len(names)}, **attrs}, span))
    return ops


def _layouts(reference: RunResult, ranks: list[RunResult], user: dict[str, str]):
    """(rank, leaf) -> Layout for every leaf a rank holds a piece of; parameters by their values."""
    import numpy as np

    world = len(ranks)
    shapes = {spec.name: tuple(int(d) for d in spec.shape) for spec in reference.recording.leaves}
    held = [(run, replace(leaf, shape=shapes[leaf.name])) for run in ranks for leaf in run.leaves
            if leaf.local != leaf.name and leaf.name in shapes]
    whole = reference.recording.parameters
    pieces = {(run.rank, leaf.name): run.recording.parameters.get(leaf.name) for run, leaf in held}
    out: dict = {}
    pending = []
    for run, leaf in held:
        values = pieces[(run.rank, leaf.name)]
        alike = False
        if leaf.kind == "parameter" and values is not None and world > 1 \
                and tuple(leaf.local_shape) != tuple(leaf.shape) and values.size and np.ptp(values) > 0:
            others = [pieces.get((other.rank, leaf.name)) for other in ranks]
            alike = all(o is not None and o.shape == values.shape and np.array_equal(o, values) for o in others)
        try:
            if leaf.kind != "parameter":   # our own cotangents, cut by the output's known piece
                layout = layout_of(leaf, run.rank, world, user)
                layout = Layout(layout.index, leaf.layout_source or layout.source, None, True)
            else:
                layout = layout_of(leaf, run.rank, world, user, whole.get(leaf.name), values, alike=alike)
        except LayoutError as error:
            return TraceFailure("unsupported", str(error), leaf.span.line)
        out[(run.rank, leaf.name)] = layout
        if layout.sentence and "cannot tell" in layout.sentence:
            pending.append((run, leaf))
    for run, leaf in pending:   # values that fit several pieces: the piece a sibling's values show
        prefer = _sibling_piece(leaf, run.rank, out, held)
        if prefer is not None:
            out[(run.rank, leaf.name)] = layout_of(leaf, run.rank, world, user, whole.get(leaf.name),
                                                   pieces[(run.rank, leaf.name)], prefer=prefer)
    return out


def _sibling_piece(leaf: Leaf, rank: int, layouts: dict, held) -> tuple | None:
    """The positions a parameter of the same module (``fc1.weight`` for ``fc1.bias``) holds on the
    dims this leaf shares with it, when that parameter's values showed its piece unambiguously."""
    owner = leaf.name.rpartition(".")[0]
    for run, other in held:
        if run.rank != rank or other.name == leaf.name or other.name.rpartition(".")[0] != owner:
            continue
        theirs = layouts.get((rank, other.name))
        if theirs is None or not theirs.confirmed or (theirs.sentence and "cannot tell" in theirs.sentence):
            continue
        index = []
        for d, (size, local) in enumerate(zip(leaf.shape, leaf.local_shape)):
            if size == local:
                index.append(tuple(range(int(size))))
                continue
            partner = next((positions for e, positions in enumerate(theirs.index)
                            if int(other.shape[e]) == int(size) and len(positions) == int(local)
                            and len(positions) != int(other.shape[e])), None)
            if partner is None:
                break
            index.append(tuple(partner))
        else:
            return tuple(index)
    return None


def _reordered(value, reference_name: str, layouts: list[Layout]):
    """The reference value with each dim's positions reordered so that every rank's piece is one
    block of it: (name, per-rank regions, ops).  The ranks' pieces on a dim must not overlap."""
    shape = [int(n) for n in value.shape]
    regions = [[] for _ in layouts]
    ops: list[Op] = []
    current = reference_name
    for d, size in enumerate(shape):
        distinct: list[tuple] = []
        for layout in layouts:
            if layout.index[d] not in distinct:
                distinct.append(tuple(layout.index[d]))
        used = [p for positions in distinct for p in positions]
        if len(set(used)) != len(used):
            return TraceFailure("unsupported", f"{value.label}: the ranks' pieces of dim {d} overlap without being "
                                               f"equal; they cannot be compared block by block", value.span.line)
        order = used + [p for p in range(size) if p not in set(used)]
        for rank, layout in enumerate(layouts):
            start = order.index(layout.index[d][0]) if layout.index[d] else 0
            regions[rank].append((start, start + len(layout.index[d])))
        if order != list(range(size)):
            target = f"order_{_safe(value.key)}#{d}"
            ops.extend(_gather_ops(current, target, d, order, {"comparison_order": True}, value.span))
            current = target
    return current, tuple(tuple(region) for region in regions), ops


def _shape_mismatch(whole: tuple, got: tuple, world: int) -> str:
    """What a rank's output of another shape than the single-device one most likely is."""
    differing = [d for d, (a, b) in enumerate(zip(whole, got)) if a != b] if len(whole) == len(got) else []
    if len(differing) == 1:
        d = differing[0]
        if got[d] * world == whole[d]:
            return (f"the rank returns its piece of dim {d}, not the value (is a gather missing? if the entry "
                    f"reshards by design, --expect out=Shard({d}) checks it as a reshard)")
        if got[d] == whole[d] * world:
            return (f"the rank returns {world} times the value along dim {d} (a gather of an input every rank "
                    f"was given whole? if the entry takes a rank's block, --expect NAME=Shard({d}) says so)")
    return "the rank returns another value than the single-device one (is a gather or a split missing?)"
