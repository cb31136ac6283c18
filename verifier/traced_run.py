"""Run recorded op lists on given leaf values, with either backend.

``run(op_lists, leaves, xp)`` runs every rank's straight-line list; a collective runs once
all members of its group have reached their k-th collective on that group (the existing
``evaluate_group`` of the collective rules gives every member's result), a message is
buffered until its receive (source, destination and tag) is reached, a ``wait`` is a no-op
for values (whether waits are in the right place is the temporal check's business).

Ops whose inputs are the very same arrays share one evaluation across ranks and across
the reference and the parallel run: replicated work is computed once, and in Z3 equal work
gives the identical term, which the proof then sees at no cost.
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import z3

from .backends import EvalError, TorchRaises
from .ir import Op
from .registry import ShapeError, get_rule
from .rules.aten import UNIT
from .traced_temporal import COLLECTIVE_KINDS, MESSAGE_KINDS

NOT_SHARED = ("empty", "dropout")  # fresh values per call: never reuse another call's result


class RunError(Exception):
    """The recording cannot be evaluated (an op we cannot model, bad shapes, a hang)."""

    def __init__(self, op: Op | None, rank: int | None, message: str, torch_raises: bool = False):
        self.op, self.rank, self.torch_raises = op, rank, torch_raises
        self.line = op.span.line if op is not None else None
        self.env: dict[str, Any] | None = None   # the failing rank's values up to the op (an op that raised)
        super().__init__(message)


@dataclass
class _Rank:
    ops: tuple[Op, ...]
    env: dict[str, Any]
    pc: int = 0

    @property
    def done(self) -> bool:
        return self.pc >= len(self.ops)


def runnable(kind: str) -> bool:
    """Kinds the runner can evaluate: registered local ops that do not ask for mesh coordinates."""
    if kind in COLLECTIVE_KINDS or kind in MESSAGE_KINDS or kind == "wait":
        return True
    rule = get_rule(kind)
    return rule is not None and rule.evaluate is not None and not rule.uses_coords


def select_results(op: Op, values: list[Any]) -> list[Any]:
    """Drop the outputs torch returned as None (``result_mask``; ``output_mask`` of backward ops)."""
    mask = op.attr("result_mask")
    if mask is None and len(values) != len(op.results):
        mask = op.attr("output_mask")
    if mask is not None and len(mask) == len(values):
        values = [value for value, keep in zip(values, mask) if keep]
    if len(values) != len(op.results):
        raise RunError(op, None, f"{op.kind} gives {len(values)} values but the recording names {len(op.results)}")
    return values


class _Cache:
    def __init__(self) -> None:
        self.entries: dict[tuple, list[Any]] = {}

    @staticmethod
    def key(op: Op, args: list[Any]) -> tuple | None:
        if any(word in op.kind for word in NOT_SHARED):
            return None
        try:
            attrs = repr(sorted(op.attrs.items()))
        except TypeError:
            return None
        return (op.kind, attrs, tuple(id(a) for a in args))


def _group_attrs(ops: list[Op], members: tuple[int, ...]) -> dict[str, Any]:
    """The collective rules index roots by position in the group, the recording by global rank.  An
    all-to-all's split sizes are each member's own (``split_sizes_per_rank``: (input, output) sizes in
    member order)."""
    op = ops[0]
    attrs = dict(op.attrs)
    for root in ("src", "dst"):
        if root in attrs:
            if int(attrs[root]) not in members:
                raise RunError(op, None, f"{op.kind} {root}={attrs[root]} is not a member of group {list(members)}")
            attrs[root] = members.index(int(attrs[root]))
    if op.kind == "all_to_all" and any(o.attr("input_split_sizes") or o.attr("output_split_sizes") for o in ops):
        attrs["split_sizes_per_rank"] = [(list(o.attr("input_split_sizes") or []),
                                          list(o.attr("output_split_sizes") or [])) for o in ops]
    else:
        for sizes in ("input_split_sizes", "output_split_sizes", "split_sizes"):
            value = attrs.get(sizes)
            if value and len(set(value)) > 1:
                raise RunError(op, None, f"{op.kind} with uneven {sizes}={list(value)}")
    attrs["mesh_dim"] = "group"
    return attrs


class Runner:
    def __init__(self, op_lists: tuple[tuple[Op, ...], ...], leaves: dict[str, Any], xp, cache: _Cache):
        self.ranks = [_Rank(ops, dict(leaves)) for ops in op_lists]
        self.xp, self.cache = xp, cache
        self.issued: dict[tuple[int, tuple[int, ...]], int] = defaultdict(int)
        self.arrived: dict[tuple[tuple[int, ...], int], dict[int, Op]] = {}
        self.mailbox: dict[tuple[int, int, int], deque] = defaultdict(deque)
        # called after each op with (rank, op position, came from a collective): the prover's cut points
        self.on_result: Callable[[int, int, bool], None] | None = None
        self.limit: int | None = None  # advance_to: stop before this position (single-list runs)

    def run(self) -> list[dict[str, Any]]:
        while not all(rank.done for rank in self.ranks):
            moved = False
            for index in range(len(self.ranks)):
                moved |= self._advance(index)
            if not moved:
                stuck = "; ".join(f"rank {i} at {r.ops[r.pc].kind} (line {r.ops[r.pc].span.line})"
                                  for i, r in enumerate(self.ranks) if not r.done)
                first = next(r for r in self.ranks if not r.done)
                raise RunError(first.ops[first.pc], None, "ranks cannot make progress: " + stuck)
        return [rank.env for rank in self.ranks]

    def advance_to(self, position: int) -> bool:
        """Run the first list up to and including ``position``; False if it blocks before."""
        self.limit = position + 1
        try:
            self._advance(0)
        finally:
            self.limit = None
        return self.ranks[0].pc > position

    def _advance(self, index: int) -> bool:
        rank, moved = self.ranks[index], False
        while not rank.done and (self.limit is None or rank.pc < self.limit):
            op = rank.ops[rank.pc]
            try:
                if op.kind in COLLECTIVE_KINDS:
                    if not self._collective(index, op):
                        return moved
                elif op.kind in MESSAGE_KINDS:
                    if not self._message(index, op):
                        return moved
                    rank.pc += 1
                elif op.kind == "wait":
                    for name in op.results:  # a wait may rename what it waited for
                        rank.env[name] = rank.env.get(op.args[0]) if op.args else None
                    rank.pc += 1
                else:
                    self._local(index, op)
                    rank.pc += 1
                    if self.on_result is not None:
                        self.on_result(index, rank.pc - 1, False)
            except RunError as error:
                error.rank = index if error.rank is None else error.rank
                raise
            except (ShapeError, EvalError, ValueError, IndexError, KeyError, TypeError, ZeroDivisionError,
                    AttributeError) as exc:
                error = RunError(op, index, f"{op.kind}: {exc}", isinstance(exc, TorchRaises))
                error.env = rank.env
                raise error from exc
            except z3.Z3Exception as exc:  # a value Z3 cannot hold (a float infinity in a product)
                raise RunError(op, index, f"{op.kind}: not encodable in Z3 ({exc})") from exc
            moved = True
        return moved

    def _args(self, index: int, op: Op) -> list[Any]:
        env = self.ranks[index].env
        missing = [name for name in op.args if name not in env]
        if missing:
            raise RunError(op, index, f"{op.kind} reads {missing[0]!r}, which is not defined before it")
        # a bare Z3 term (numpy unwraps 0-d results) would meet a 0-d array through Z3's own operators
        return [_zero_d(env[name]) if isinstance(env[name], z3.ExprRef) else env[name] for name in op.args]

    def _local(self, index: int, op: Op) -> None:
        rule = get_rule(op.kind)
        if rule is None or rule.evaluate is None or rule.uses_coords:
            raise RunError(op, index, f"op {op.kind} is not modelled")
        args = self._args(index, op)
        key = _Cache.key(op, args)
        if key is not None and key in self.cache.entries:
            values = self.cache.entries[key]
        else:
            with np.errstate(all="ignore"):
                values = list(rule.evaluate(self.xp, args, op.attrs, UNIT))
            if key is not None:
                self.cache.entries[key] = values
                self.cache.entries[key + ("keepalive",)] = args  # ids stay unique while cached
        # every op selects its own results: two ops with one key may name different outputs
        for name, value in zip(op.results, select_results(op, values)):
            self.ranks[index].env[name] = value

    def _collective(self, index: int, op: Op) -> bool:
        members = tuple(int(m) for m in op.attr("group", ()))
        if index not in members or any(not 0 <= m < len(self.ranks) for m in members):
            raise RunError(op, index, f"{op.kind} group {list(members)} does not fit {len(self.ranks)} rank(s)")
        position = self.issued[(index, members)]
        slot = self.arrived.setdefault((members, position), {})
        slot[index] = op
        if len(slot) < len(members):
            return False
        ops = [slot[m] for m in members]
        for other in ops[1:]:
            if other.kind != ops[0].kind:
                raise RunError(other, None, f"ranks of group {list(members)} issue different collectives together: "
                                            f"{ops[0].kind} (line {ops[0].span.line}) and {other.kind} "
                                            f"(line {other.span.line})")
        rule = get_rule(op.kind)
        per_rank_args = [self._args(m, o) for m, o in zip(members, ops)]
        if rule.arity == (1, 1) and any(len(args) != 1 for args in per_rank_args):
            # rooted collectives: ranks that send nothing (non-source of scatter) pass no tensor
            if op.kind not in ("scatter", "broadcast") or not any(per_rank_args):
                raise RunError(op, None, f"{op.kind} expects one tensor per rank")
            filler = next(args[0] for args in per_rank_args if args)
            per_rank_args = [args or [filler] for args in per_rank_args]
        results = rule.evaluate_group(self.xp, per_rank_args, _group_attrs(ops, members))
        positions = [self.ranks[m].pc for m in members]
        for member, member_op, values in zip(members, ops, results):
            rank = self.ranks[member]
            for name, value in zip(member_op.results, list(values)):
                rank.env[name] = value
            self.issued[(member, members)] += 1
            rank.pc += 1
        del self.arrived[(members, position)]
        if self.on_result is not None:
            for member, position in zip(members, positions):
                self.on_result(member, position, True)
        return True

    def _message(self, index: int, op: Op) -> bool:
        peer, tag = int(op.attr("peer")), int(op.attr("tag", 0) or 0)
        if op.kind in ("send", "isend"):
            self.mailbox[(index, peer, tag)].append(self._args(index, op)[0])
            return True
        queue = self.mailbox[(peer, index, tag)]
        if not queue:
            return False
        value = queue.popleft()
        for name in op.results:
            self.ranks[index].env[name] = value
        return True


def _zero_d(term: Any) -> np.ndarray:
    array = np.empty((), dtype=object)
    array[()] = term
    return array


def run(op_lists: tuple[tuple[Op, ...], ...], leaves: dict[str, Any], xp, cache: _Cache | None = None
        ) -> list[dict[str, Any]]:
    """Every rank's environment (leaves and every value it computed) after running its list."""
    return Runner(op_lists, leaves, xp, cache or _Cache()).run()


def runner(op_lists: tuple[tuple[Op, ...], ...], leaves: dict[str, Any], xp, cache: _Cache) -> Runner:
    return Runner(op_lists, leaves, xp, cache)


def new_cache() -> _Cache:
    return _Cache()
