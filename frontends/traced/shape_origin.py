"""Where a rank's shapes part from the single device's: the op a wrong shape comes from.

Two findings have no values of matching shapes for the verifier's culprit walk: a rank that raises on
shapes where one device runs (``mat1 and mat2 shapes cannot be multiplied``), and a rank that returns an
output of another shape.  Both are named where the shape went wrong, read from the shapes torch gave
every recorded value on both runs (ops pair by line and kind, as the culprit walk pairs them):

* a raise: the operand whose shape differs from its single-device counterpart (for a contraction, in a
  contracted dim) is followed back to the op that made its shape differ while its own operands had the
  single device's shapes: the split on the wrong dim, not the matmul that could not multiply; when the
  operands went wrong at different ops (a collective's shard-shaped buffer and pieces of another shape),
  the operands that are no block of their counterpart are followed to the first op that made a non-block
  from blocks (a gather concatenated along another dim);
* an output: the value is followed back through operands that are no block of their counterpart
  (a rank's legitimate shard is a block of the single device's value: each dim divides it) to the op
  that made a non-block from blocks: the all-to-all given swapped dims, not the ``return``; an output
  too long because a gather read a value every rank holds whole is named where that value should have
  become a piece (``gathered_whole``: the line binding it to a value made before it), not the gather.
"""
from __future__ import annotations

from typing import Callable, Optional

from verifier.ir import Op
from verifier.traced_check import paired_positions

from .recorder import FailedOp, Recording

# contractions: operand position -> the dim it contracts (a shard there breaks the product)
_CONTRACTED = {
    "aten.mm.default": {0: -1, 1: 0},
    "aten.bmm.default": {0: -1, 1: 1},
    "aten.addmm.default": {1: -1, 2: 0},
    "aten.baddbmm.default": {1: -1, 2: 1},
    "aten.matmul.default": {0: -1, 1: -2},
}


def counterparts(reference: Recording, rank: Recording) -> dict[str, str]:
    """Rank value name -> the single device's value it stands for.  A leaf pairs with the leaf of its
    name (a parameter's piece ``p@local`` with ``p``); an op the single device does not record (a
    collective, or a reshape around one: the identity on one device) stands for its first operand."""
    made = {name for op in rank.ops for name in op.results}
    pairs = {name: name for name in rank.shapes if name in reference.shapes and name not in made}
    pairs.update({name: name.split("@local")[0] for name in rank.shapes
                  if name.endswith("@local") and name.split("@local")[0] in reference.shapes})
    ops, theirs = tuple(rank.ops), tuple(reference.ops)
    for position, partner in paired_positions(theirs, ops).items():
        pairs.update(zip(ops[position].results, theirs[partner].results))
    for op in ops:
        if op.args and op.args[0] in pairs:
            for name in op.results:
                pairs.setdefault(name, pairs[op.args[0]])
    return pairs


def _judge(rank: Recording, reference: Recording, pairs: dict[str, str],
           same: Callable[[tuple[int, ...], tuple[int, ...]], bool]) -> Callable[[str], Optional[bool]]:
    """Whether a rank value's shape is wrong against its counterpart's (None: no shape or no counterpart)."""
    def judge(name: str) -> Optional[bool]:
        partner = pairs.get(name)
        if partner is None or name not in rank.shapes or partner not in reference.shapes:
            return None
        return not same(rank.shapes[name], reference.shapes[partner])
    return judge


def is_block(shape: tuple[int, ...], whole: tuple[int, ...]) -> bool:
    """``shape`` could be one block of a value of shape ``whole``: same rank, each dim divides."""
    return len(shape) == len(whole) and all(0 < s <= w and w % s == 0 for s, w in zip(shape, whole))


def _walk(rank: Recording, start: str, judge: Callable[[str], Optional[bool]]) -> Optional[Op]:
    """From ``start``'s producer back through wrong operands (the latest made first) to the op none
    of whose operands is wrong: where the wrong shape was made.  A value ``judge`` cannot judge (no
    shape torch gave it, as the whole a gather records before its pieces, or no counterpart) is wrong
    when an operand of its producer is."""
    producer = {name: op for op in rank.ops for name in op.results}
    order = {id(op): i for i, op in enumerate(rank.ops)}
    memo: dict[str, bool] = {}

    def wrong(name: str) -> bool:
        if name not in memo:
            memo[name] = False   # a cycle judges nothing
            verdict = judge(name)
            if verdict is None:
                made = producer.get(name)
                verdict = made is not None and any(wrong(arg) for arg in made.args if arg in producer)
            memo[name] = verdict
        return memo[name]

    op, seen = producer.get(start), set()
    while op is not None and id(op) not in seen:
        seen.add(id(op))
        bad = [name for name in op.args if name in producer and wrong(name)]
        if not bad:
            return op
        op = producer[max(bad, key=lambda name: order[id(producer[name])])]
    return op


def where_raised(reference: Recording, rank: Recording, failed: Optional[FailedOp]) -> Optional[Op]:
    """The op that made the shape a rank's failing op could not take (None: not found)."""
    if failed is None:
        return None
    pairs = counterparts(reference, rank)
    differs = _judge(rank, reference, pairs, lambda mine, theirs: mine == theirs)
    operands = [(i, name) for i, name in enumerate(failed.args) if name is not None and differs(name)]
    contracted = _CONTRACTED.get(failed.kind)
    if contracted is not None:
        operands = [(i, name) for i, name in operands if i in contracted
                    and _dim_differs(rank.shapes[name], reference.shapes[pairs[name]], contracted[i])]
        operands = _cut_against_block(rank, reference, pairs, failed, operands, contracted) or operands
    origins: dict[int, Optional[Op]] = {}
    for _, name in operands:
        made = _walk(rank, name, differs)
        source = _size_source(rank, reference, pairs, made) if made is not None else None
        origin = _walk(rank, source, differs) if source is not None else made
        origins[id(origin)] = origin
    if len(origins) != 1:   # none, or operands whose shapes went wrong at different ops
        return _first_non_block(rank, reference, pairs, failed)
    return next(iter(origins.values()))


def _first_non_block(rank: Recording, reference: Recording, pairs: dict[str, str], failed: FailedOp) -> Optional[Op]:
    """For operands whose shapes went wrong at different ops (or none found): the operands that are no
    block of their single-device counterparts (a shard as parallelism makes it is one: each dim divides)
    are the wrong ones; the first op the rank ran, of those they come from, that made a non-block from
    operands none of which was one (a gather concatenating its pieces along another dim than they were cut,
    the pieces later read by a collective of another shape) is where the shapes part.  Only values with
    as many dims as their counterparts are judged.  None when no operand is a non-block, or no such op
    is found."""
    # a value of another number of dims than its counterpart is no evidence (an all-to-all's reshapes
    # depend on the world size: the single device's are others)
    not_block = _judge(rank, reference, pairs, lambda mine, theirs: len(mine) != len(theirs) or is_block(mine, theirs))
    starts = [name for name in failed.args if name is not None and not_block(name)]
    if not starts:
        return None
    return _first_maker(rank, starts, lambda name: bool(not_block(name)))


def _first_maker(rank: Recording, starts: list[str], wrong: Callable[[str], bool]) -> Optional[Op]:
    """The first op the rank ran, of those ``starts`` come from, that made a ``wrong`` value from operands
    none of which is ``wrong``."""
    producer = {result: op for op in rank.ops for result in op.results}
    ancestors, stack = set(), list(starts)
    while stack:
        op = producer.get(stack.pop())
        if op is not None and id(op) not in ancestors:
            ancestors.add(id(op))
            stack.extend(op.args)
    for op in rank.ops:
        if id(op) in ancestors and any(wrong(r) for r in op.results) and not any(wrong(a) for a in op.args):
            return op
    return None


def _cut_against_block(rank: Recording, reference: Recording, pairs: dict[str, str], failed: FailedOp,
                       operands: list[tuple[int, str]], contracted: dict[int, int]) -> list[tuple[int, str]] | None:
    """One operand of a contraction holds a block of the contracted dim (a shard: its size divides the single
    device's) and the other holds that dim whole, though the code cut it along another dim: that cut is
    where the layouts part (``h @ w_down.chunk(world, dim=1)[rank]`` behind a column-parallel ``h``: the
    w_down cut, not h's, which is the block tensor parallelism makes).  The other operand then, else None."""
    if len(operands) != 1:
        return None
    index, name = operands[0]
    mine, theirs = rank.shapes[name][contracted[index]], reference.shapes[pairs[name]][contracted[index]]
    if not 0 < mine < theirs or theirs % mine:
        return None
    for other, dim in contracted.items():
        partner = failed.args[other] if other < len(failed.args) else None
        if other == index or partner not in pairs or partner not in rank.shapes \
                or pairs[partner] not in reference.shapes:
            continue
        shape, whole = rank.shapes[partner], reference.shapes[pairs[partner]]
        if len(shape) == len(whole) and shape != whole and not _dim_differs(shape, whole, dim):
            return [(other, partner)]
    return None


def _size_source(rank: Recording, reference: Recording, pairs: dict[str, str], made: Op) -> Optional[str]:
    """An op that reads no recorded value (``torch.arange(logits.size(0))``, ``torch.empty(n, h)``) got its
    wrong shape from a size the code read off another value, which torch's dispatcher does not see: the
    latest value made before it whose shape parts from its counterpart's by the same sizes (4 rows where
    one device has 8), when exactly one value made last does.  None otherwise."""
    if any(arg in rank.shapes for arg in made.args) or not made.results or made.results[0] not in pairs:
        return None
    mine, theirs = rank.shapes.get(made.results[0]), reference.shapes.get(pairs[made.results[0]])
    if mine is None or theirs is None or len(mine) != len(theirs):
        return None
    sizes = {(m, t) for m, t in zip(mine, theirs) if m != t}
    if not sizes:
        return None
    position = next(i for i, op in enumerate(rank.ops) if op is made)
    for op in reversed(rank.ops[:position]):
        found = [name for name in op.results if name in pairs and name in rank.shapes
                 and pairs[name] in reference.shapes
                 and len(rank.shapes[name]) == len(reference.shapes[pairs[name]])
                 and sizes <= set(zip(rank.shapes[name], reference.shapes[pairs[name]]))]
        if found:
            return found[0] if len(found) == 1 else None
    return None


# ops that keep their operand's elements where they are (views, copies) or map them one to one
_SAME_SHAPE_WALK = ("aten.t.", "aten.transpose.", "aten.view.", "aten._unsafe_view.", "aten.reshape.", "aten.alias.",
                    "aten.expand.", "aten.permute.", "aten.detach.", "aten.clone.", "aten._to_copy.",
                    "aten.contiguous.")


def _shape_maker(rank: Recording, name: str, producer: dict[str, int], seen: Optional[set] = None) -> Optional[int]:
    """The position of the op that gave ``name`` its shape: back through views and copies, and through
    ops whose result has the shape of one of their operands (GeLU, a bias add; a product of two such, when
    both lead to one op), to the op whose result has none of its operands' shapes (a gather's
    concatenation, a split)."""
    seen = set() if seen is None else seen
    while name in producer and name not in seen:
        seen.add(name)
        position = producer[name]
        op = rank.ops[position]
        operands = [arg for arg in op.args if arg in rank.shapes]
        if op.kind.startswith(_SAME_SHAPE_WALK) and len(operands) == 1:
            name = operands[0]
            continue
        same = [arg for arg in operands if rank.shapes[arg] == rank.shapes.get(name)]
        if not same:
            return position
        if len(set(same)) != 1:   # ``F.silu(gate) * up``: one maker when every such operand names the same
            makers = {_shape_maker(rank, arg, producer, set(seen)) for arg in set(same)}
            return makers.pop() if len(makers) == 1 else None
        name = same[0]
    return None


def layout_built_at(reference: Recording, rank: Recording, failed: Optional[FailedOp]) -> Optional[tuple[int, str]]:
    """(line, words) where the layout of a contraction's operand was chosen, for a rank raising on it:
    the operand's shape was made by an op the single device does not run (a gather, a split), inside the
    forward of an installed module, which the user configures where it is built (``gather_output=True``
    on the layer before, ``input_is_parallel=False``); that building line, when all such operands name
    one.  None otherwise (an operand the user's own code shaped is ``where_raised``'s)."""
    from .module_lines import innermost

    if failed is None or failed.kind not in _CONTRACTED or not rank.module_lines:
        return None
    producer = {result: position for position, op in enumerate(rank.ops) for result in op.results}
    paired = paired_positions(tuple(reference.ops), tuple(rank.ops))
    found: dict[int, str] = {}
    for index in _CONTRACTED[failed.kind]:
        name = failed.args[index] if index < len(failed.args) else None
        position = _shape_maker(rank, name, producer) if name is not None else None
        for _ in range(8):
            if position is None or position not in paired \
                    or not _as_on_one_device(rank.ops[position], reference.ops[paired[position]], rank, reference):
                break
            # an op both runs make the same shapes with (the user's ``chunk`` of a fused projection) keeps
            # the layout of its one operand: the shape was made before it
            operands = [arg for arg in rank.ops[position].args if arg in rank.shapes]
            position = _shape_maker(rank, operands[0], producer) if len(operands) == 1 else None
        if position is None or position in paired:
            continue
        line = innermost(rank.module_lines, position)
        if line is not None:
            found[line] = rank.ops[position].kind
    if len(found) != 1:
        return None
    line, kind = next(iter(found.items()))
    return line, (f"the operand's shape was made by {kind}, which the single device does not run, inside the "
                  f"forward of the installed module built at line {line}: its flags choose that layout")


def _as_on_one_device(op: Op, theirs: Op, rank: Recording, reference: Recording) -> bool:
    """The rank's op and its single-device partner made results of the same shapes."""
    return len(op.results) == len(theirs.results) and all(
        mine in rank.shapes and other in reference.shapes and tuple(rank.shapes[mine]) == tuple(reference.shapes[other])
        for mine, other in zip(op.results, theirs.results))


# ops that only view or copy their one operand: a weight read through its transpose is the weight read
VIEWS = ("aten.t.", "aten.transpose.", "aten.view.", "aten._unsafe_view.", "aten.reshape.", "aten.alias.",
         "aten.expand.", "aten.permute.", "aten.detach.", "aten.clone.", "aten._to_copy.")


def parameter_cut(reference: Recording, rank: Recording, failed: Optional[FailedOp]) -> Optional[tuple[int, str]]:
    """(line, name) of the parameter a rank's raising contraction reads (through views) whose piece on the
    rank is no equal block of the single device's parameter (a column bound off by one where the layer
    cut it: 21 of 40 columns), with the line that made it; None unless exactly one operand reads one."""
    if failed is None or failed.kind not in _CONTRACTED:
        return None
    producer = {result: op for op in rank.ops for result in op.results}
    found: dict[str, int] = {}
    for index in _CONTRACTED[failed.kind]:
        name = failed.args[index] if index < len(failed.args) else None
        for _ in range(8):
            if name is None or name in rank.made_lines:
                break
            op = producer.get(name)
            name = op.args[0] if op is not None and op.kind.startswith(VIEWS) and op.args else None
        if name is None or name not in rank.made_lines:
            continue
        whole = name.split("@local")[0]
        if name in rank.shapes and whole in reference.shapes and not is_block(rank.shapes[name], reference.shapes[whole]):
            found[whole] = rank.made_lines[name]
    if len(found) != 1:
        return None
    whole, line = next(iter(found.items()))
    return line, whole


def _dim_differs(shape: tuple[int, ...], theirs: tuple[int, ...], dim: int) -> bool:
    if len(shape) != len(theirs) or not -len(shape) <= dim < len(shape):
        return False
    return shape[dim] != theirs[dim]


def where_output_shape(reference: Recording, rank: Recording, name: str) -> Optional[Op]:
    """The op where a rank's output of another shape than the single device's stopped being a block
    of its counterpart (None: every value on its way is a block, e.g. a gather left out at the end)."""
    pairs = counterparts(reference, rank)
    not_block = _judge(rank, reference, pairs, is_block)
    if not not_block(name):
        return None
    stacked = _stacked_pieces(rank, reference, pairs)
    return _walk(rank, name, lambda value: False if value in stacked else not_block(value))


def _stacked_pieces(rank: Recording, reference: Recording, pairs: dict[str, str]) -> set[str]:
    """Results of gathers that stack the ranks' pieces along dim 0 (the collective's own layout, whatever
    the code wants: ``all_gather_into_tensor``, a functional gather before its own chunk and cat), each
    piece a block of its single-device counterpart and not all of it: the pieces are right, so the stack
    is no wrong shape yet; the op that cuts it into values that are no blocks (a chunk along the wrong
    dim) is where the shapes part.  A gather of a value every rank holds whole is left to ``gathered_whole``."""
    found = set()
    for op in rank.ops:
        if op.kind != "all_gather" or int(op.attrs.get("dim", 0)) != 0 or len(op.args) != 1 or len(op.results) != 1:
            continue
        piece, partner = op.args[0], pairs.get(op.args[0])
        if piece in rank.shapes and partner in reference.shapes \
                and is_block(rank.shapes[piece], reference.shapes[partner]) \
                and tuple(rank.shapes[piece]) != tuple(reference.shapes[partner]):
            found.add(op.results[0])
    return found


def where_pieces_lost(reference: Recording, rank: Recording, name: str, world: int) -> Optional[Op]:
    """For a rank's output of another shape whose every value is a block: the first op the rank ran, of
    those the output comes from, that made a value shorter along a dim than 1/world of its single-device
    counterpart from operands none of which was (a sequence scatter applied to a piece already: 2 of 8
    rows on each of 2 ranks).  From there on the ranks' pieces together cannot hold the single device's
    value, whatever gathers follow.  None when no op did (a gather left out at the end)."""
    pairs = counterparts(reference, rank)

    def short(value: str) -> bool:
        partner = pairs.get(value)
        if partner is None or value not in rank.shapes or partner not in reference.shapes:
            return False
        mine, theirs = rank.shapes[value], reference.shapes[partner]
        return len(mine) == len(theirs) and any(m * world < t for m, t in zip(mine, theirs))

    return _first_maker(rank, [name], short)


def gathered_whole(reference: Recording, rank: Recording, name: str) -> Optional[tuple[Op, int, str]]:
    """For a rank's output of another shape: the first gather the rank ran, of those the output comes from,
    whose operand every rank holds whole (its single-device counterpart's shape: a column-parallel piece,
    whole along the gathered rows, is a piece still), and the line where that value should have become one: followed back from the gather through
    ops that keep it whole (a per-token LayerNorm) to a name bound on a line that made none of it
    (``local_out = partial`` where a reduce-scatter was, ``local = x`` where a scatter was).  (the gather,
    that line, the name) - None when no gather read a whole operand or no such line is found (the value
    was made whole where it was bound, or by a collective: the gather may be the one too many)."""
    pairs = counterparts(reference, rank)
    producer = {result: op for op in rank.ops for result in op.results}
    ancestors, stack = set(), [name]
    while stack:
        op = producer.get(stack.pop())
        if op is not None and id(op) not in ancestors:
            ancestors.add(id(op))
            stack.extend(op.args)

    def whole(value: str) -> bool:   # the rank holds the single device's whole value (its shape)
        partner = pairs.get(value)
        return (partner is not None and value in rank.shapes and partner in reference.shapes
                and tuple(rank.shapes[value]) == tuple(reference.shapes[partner]))

    gather = next((op for op in rank.ops if id(op) in ancestors and op.kind == "all_gather" and op.args
                   and whole(op.args[0])), None)
    if gather is None:
        return None
    reader, value = gather, gather.args[0]
    for _ in range(16):
        bound = [(variable, line) for read, variable, line in reader.span.bound if read == value]
        made = producer.get(value)
        if len(bound) == 1:
            variable, line = bound[0]
            if made is None or made.span.place() != (line, reader.span.place()[1]):
                return gather, line, variable
        if made is None or made.kind.startswith(("all_", "reduce_scatter", "broadcast")):
            return None
        # the value itself, not a replicated weight every rank also holds whole (a LayerNorm's)
        following = [arg for arg in made.args if whole(arg) and rank.shapes.get(arg) == rank.shapes.get(value)]
        if len(following) != 1:
            return None
        reader, value = made, following[0]
    return None


def located(op: Optional[Op], raised_line: Optional[int]) -> Optional[tuple[int, Optional[str], str]]:
    """An op's (line, file, words) as a finding names it: the line of the user's package it ran in
    (with that file), else its line in the checked file; None when that is ``raised_line`` or unknown."""
    if op is None:
        return None
    line, file = op.span.place()
    if file is None and (line is None or line == raised_line):
        return None
    return line, file, f"{op.kind} ({op.span.where()})"
