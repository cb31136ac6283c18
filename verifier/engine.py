"""Runs an IR program on every rank of a mesh, with either backend.

Ranks advance in rounds, one op per rank per round, so a program without point-to-point
traffic runs in lock-step and every value is complete on all ranks at the end of the round
that produced it (the equivalence check relies on this to cut at proven-equal values).
Collectives wait until every member of their group has reached them; ``recv`` waits for the
matching ``send`` (sends are buffered here: the value semantics do not depend on blocking,
deadlocks are the temporal check's business).
"""
from __future__ import annotations

import ast
import itertools
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Callable


from .backends import EvalError
from .ir import Mesh, Op, Program, eval_dim, mesh_sizes, parse_expression
from .registry import RankContext, ShapeError, get_rule


class EngineError(Exception):
    """The program cannot be run as written (bad shapes, mismatched collectives...)."""

    def __init__(self, op: Op | None, message: str):
        self.op = op
        self.line = op.span.line if op is not None else None
        self.where: str | None = None  # "reference" or "parallel" once the equivalence check knows
        super().__init__(message)


def eval_predicate(expression: str, env: dict[str, int]) -> bool:
    """Evaluate a ``when=`` condition such as ``tp == 0 and pp % 2 == 1`` over mesh coords."""
    tree = parse_expression(expression)

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not walk(node.operand)
        if isinstance(node, ast.Compare):
            left = walk(node.left)
            for operator, right_node in zip(node.ops, node.comparators):
                right = walk(right_node)
                ok = {ast.Eq: left == right, ast.NotEq: left != right, ast.Lt: left < right,
                      ast.LtE: left <= right, ast.Gt: left > right, ast.GtE: left >= right}[type(operator)]
                if not ok:
                    return False
                left = right
            return True
        return eval_dim(ast.unparse(node), env)

    return bool(walk(tree))


def rank_coords(mesh: Mesh) -> list[dict[str, int]]:
    """All ranks in row-major order of the mesh dims (global rank = index in this list)."""
    return [dict(zip(mesh.names, coords)) for coords in itertools.product(*(range(s) for _, s in mesh.dims))]


def rank_env(mesh: Mesh, coords: dict[str, int]) -> dict[str, int]:
    return {**coords, "world": mesh.world, **mesh_sizes(mesh)}


@dataclass
class _Rank:
    coords: dict[str, int]
    env: dict[str, Any]
    pc: int = 0


@dataclass
class Engine:
    program: Program
    mesh: Mesh
    xp: Any
    local_inputs: list[dict[str, Any]]
    ranks: list[_Rank] = field(init=False)
    mailbox: dict[tuple[int, int, int], deque] = field(init=False)  # (sender, receiver, tag) -> FIFO

    def __post_init__(self) -> None:
        coords = rank_coords(self.mesh)
        self.ranks = [_Rank(c, dict(inputs)) for c, inputs in zip(coords, self.local_inputs)]
        self.mailbox = defaultdict(deque)
        self._index = {tuple(c.values()): i for i, c in enumerate(coords)}
        self._done_count = [0] * len(self.program.ops)
        self._issued = [defaultdict(int) for _ in self.ranks]  # collectives issued per mesh dim

    # -- helpers ---------------------------------------------------------------------------
    def _runs_here(self, op: Op, rank: _Rank) -> bool:
        condition = op.attr("when")
        return True if condition is None else eval_predicate(str(condition), rank_env(self.mesh, rank.coords))

    def _group(self, rank: _Rank, mesh_dim: str) -> list[int]:
        if mesh_dim not in self.mesh.names:
            raise EngineError(None, f"unknown mesh dim {mesh_dim!r} (mesh has {', '.join(self.mesh.names)})")
        members = []
        for c in range(self.mesh.size(mesh_dim)):
            coords = dict(rank.coords)
            coords[mesh_dim] = c
            members.append(self._index[tuple(coords.values())])
        return members

    def _peer(self, op: Op, rank: _Rank) -> int:
        mesh_dim = str(op.attr("mesh_dim", self.mesh.names[0]))
        if mesh_dim not in self.mesh.names:
            raise EngineError(op, f"unknown mesh dim {mesh_dim!r}")
        target = int(eval_dim(str(op.attr("peer")), rank_env(self.mesh, rank.coords)))
        if not 0 <= target < self.mesh.size(mesh_dim):
            raise EngineError(op, f"peer {op.attr('peer')} = {target} is outside {mesh_dim} of size "
                                  f"{self.mesh.size(mesh_dim)}")
        coords = dict(rank.coords)
        coords[mesh_dim] = target
        return self._index[tuple(coords.values())]

    def _tag(self, op: Op, rank: _Rank) -> int:
        """Point-to-point ``tag=`` (0 by default): a message only meets a receive with its tag."""
        return int(eval_dim(str(op.attr("tag", 0)), rank_env(self.mesh, rank.coords)))

    def _finish(self, rank: _Rank, op_index: int, results: list[Any]) -> None:
        op = self.program.ops[op_index]
        if len(results) != len(op.results):
            raise EngineError(op, f"{op.kind} produces {len(results)} values, {len(op.results)} names given")
        for name, value in zip(op.results, results):
            rank.env[name] = value
        rank.pc += 1
        self._done_count[op_index] += 1
        if self._done_count[op_index] == len(self.ranks):
            self.completed.append(op_index)

    def _args(self, op: Op, rank: _Rank) -> list[Any]:
        try:
            return [rank.env[name] for name in op.args]
        except KeyError as missing:
            raise EngineError(op, f"{op.kind} reads {missing.args[0]!r}, which is not defined on rank "
                                  f"{rank.coords}") from None

    # -- one round -------------------------------------------------------------------------
    def step(self) -> bool:
        """Advance every rank by at most one op; return False when nothing moved."""
        self.completed: list[int] = []
        moved = False
        arrived: list[int] = []
        shared: dict[tuple, list[Any]] = {}
        for index, rank in enumerate(self.ranks):
            if rank.pc >= len(self.program.ops):
                continue
            op_index = rank.pc
            op = self.program.ops[op_index]
            try:
                if not self._runs_here(op, rank):
                    self._finish(rank, op_index, [rank.env.get(op.args[0]) if op.args else None] * len(op.results))
                    moved = True
                    continue
                rule = get_rule(op.kind)
                if rule is None:
                    raise EngineError(op, f"unknown op {op.kind!r}")
                if op.kind in ("send", "isend"):
                    self.mailbox[(index, self._peer(op, rank), self._tag(op, rank))].append(self._args(op, rank)[0])
                    self._finish(rank, op_index, [])
                    moved = True
                elif op.kind in ("recv", "irecv"):
                    queue = self.mailbox[(self._peer(op, rank), index, self._tag(op, rank))]
                    if queue:
                        self._finish(rank, op_index, [queue.popleft()])
                        moved = True
                elif op.kind == "wait":
                    self._finish(rank, op_index, [])
                    moved = True
                elif rule.is_collective:
                    arrived.append(index)
                else:
                    self._finish(rank, op_index, self._evaluate_local(rule, op, op_index, rank, shared))
                    moved = True
            except EngineError:
                raise
            except (ShapeError, EvalError, ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as exc:
                raise EngineError(op, f"{op.kind}: {exc}") from exc
        return self._run_collectives(arrived) or moved

    def _evaluate_local(self, rule, op: Op, op_index: int, rank: _Rank, shared: dict) -> list[Any]:
        """Ranks holding the very same input arrays (replicated values) share one evaluation:
        the op is a pure function of its inputs unless it reads the rank's coordinates."""
        args = self._args(op, rank)
        key = None if rule.uses_coords else (op_index, tuple(id(a) for a in args))
        if key is not None and key in shared:
            return shared[key]
        results = list(rule.evaluate(self.xp, args, op.attrs, RankContext(self.mesh, rank.coords)))
        if key is not None:
            shared[key] = results
        return results

    def _run_collectives(self, arrived: list[int]) -> bool:
        """Run every collective whose whole group has arrived.

        Members are matched by how many collectives they have issued on that mesh dim, not by
        op position: ``if rank == 0: all_reduce(y) else: all_reduce(y)`` is one collective
        written twice.  Members that arrive at different kinds of collective hang or mix
        tensors in real life; that is an error here (the temporal check names both lines)."""
        moved = False
        handled: set[int] = set()
        for index in arrived:
            if index in handled:
                continue
            rank = self.ranks[index]
            mesh_dim = str(self.program.ops[rank.pc].attr("mesh_dim"))
            group = self._group(rank, mesh_dim)
            position = self._issued[index][mesh_dim]
            if not all(m in arrived and self._issued[m][mesh_dim] == position
                       and self.program.ops[self.ranks[m].pc].attr("mesh_dim") == mesh_dim for m in group):
                continue
            ops = [self.program.ops[self.ranks[m].pc] for m in group]
            signature = self._signature(ops[0])
            for other in ops[1:]:
                if self._signature(other) != signature:
                    raise EngineError(other, f"ranks of one {mesh_dim} group issue different collectives together: "
                                             f"{ops[0].kind} (line {ops[0].span.line}) and {other.kind} "
                                             f"(line {other.span.line})")
            rule = get_rule(ops[0].kind)
            try:
                results = rule.evaluate_group(self.xp, [self._args(op, self.ranks[m]) for op, m in zip(ops, group)],
                                              ops[0].attrs)
            except EngineError:
                raise
            except (ShapeError, EvalError, ValueError, IndexError, TypeError, ZeroDivisionError) as exc:
                raise EngineError(ops[0], f"{ops[0].kind}: {exc}") from exc
            for member, result in zip(group, results):
                self._issued[member][mesh_dim] += 1
                self._finish(self.ranks[member], self.ranks[member].pc, list(result))
                handled.add(member)
            moved = True
        return moved

    @staticmethod
    def _signature(op: Op) -> tuple:
        return (op.kind,) + tuple(sorted((k, str(v)) for k, v in op.attrs.items() if k not in ("when", "handle")))

    def stuck_report(self) -> str:
        blocked = []
        for index, rank in enumerate(self.ranks):
            if rank.pc < len(self.program.ops):
                op = self.program.ops[rank.pc]
                blocked.append(f"rank {index} at {op.kind} (line {op.span.line})")
        return "; ".join(blocked)

    @property
    def finished(self) -> bool:
        return all(rank.pc >= len(self.program.ops) for rank in self.ranks)

    def run(self, after_round: Callable[[list[int]], None] | None = None) -> list[dict[str, Any]]:
        while not self.finished:
            if not self.step():
                raise EngineError(None, "ranks cannot make progress: " + self.stuck_report())
            if after_round is not None and self.completed:
                after_round(self.completed)
        return [rank.env for rank in self.ranks]

