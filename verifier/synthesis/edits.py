"""Edits of an IR program: the moves the synthesizer searches over.

Every edit is a frozen value that applies to a ``Program`` and gives a new one, says what it
does in the user's terms (the source line it is anchored at), and resolves to a ``Change``
record — lines, kinds, attributes — that ``frontends.patches`` spells as source:

* ``InsertCollectives``: one collective, or a short chain (reduce-scatter + all-gather,
  all-gather + local sum), on a value, placed after the op that produced it or just before
  one consumer; later readers see the result;
* ``ChangeCollective``: another kind, mesh dim, reduce op or dim for an existing collective;
* ``RemoveCollective``: drop a collective, its readers read its operand (and its wait goes);
* ``MoveWait`` / ``InsertWait``: put the wait of an async collective before the first read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..ir import Op, Program, Span

Attrs = tuple[tuple[str, Any], ...]

AFTER_PRODUCER, BEFORE_CONSUMER = "after-producer", "before-consumer"


def _rename(op: Op, old: str, new: str) -> Op:
    if old not in op.args:
        return op
    return replace(op, args=tuple(new if a == old else a for a in op.args))


def _fresh(program: Program, base: str, taken: set[str] | None = None) -> str:
    used = {spec.name for spec in program.inputs} | {r for op in program.ops for r in op.results} | (taken or set())
    stem = base
    for k in range(1, 1000):
        candidate = f"{stem}_{k}" if k > 1 else stem
        if candidate not in used:
            return candidate
    raise ValueError(f"no fresh name for {base}")


def _line_of(program: Program, index: int) -> int | None:
    return program.ops[index].span.line if 0 <= index < len(program.ops) else None


def _producer(program: Program, value: str) -> int | None:
    for index, op in enumerate(program.ops):
        if value in op.results:
            return index
    return None


def label(program: Program, value: str) -> str:
    """A value in the user's terms: its variable name, or what computes it on which line."""
    if not re.fullmatch(r"t\d+", value):
        return re.sub(r"_\d+$", "", value)
    producer = _producer(program, value)
    if producer is None:
        return value
    op = program.ops[producer]
    return f"the {op.kind} result" + (f" of line {op.span.line}" if op.span.line else "")


def _describe_attrs(kind: str, attrs: dict[str, Any]) -> str:
    shown = [f"{k}={v}" for k, v in attrs.items() if k not in ("mesh_dim",)]
    return f"{kind}({', '.join(shown)})" if shown else kind


@dataclass(frozen=True)
class Change:
    """An edit resolved against the program it applies to: what a source patcher needs.

    ``line`` is the anchor: the line after which inserted code goes, the line of the changed
    or removed collective, or the line of the wait being moved; ``target_line`` is the line
    of the op a wait must precede.
    """

    action: str  # insert | change | remove | move_wait | insert_wait
    line: int | None
    value: str | None = None  # the IR value an inserted collective reads / a changed one reads
    result: str | None = None  # the IR value the (changed/removed) collective produced
    kind: str | None = None
    old_kind: str | None = None
    mesh_dim: str | None = None
    attrs: Attrs = ()
    old_attrs: Attrs = ()
    steps: tuple["Step", ...] = ()
    target_line: int | None = None
    handle: str | None = None
    results: tuple[str, ...] = ()  # insert: the names of the new values, in order

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    @property
    def old_attr_dict(self) -> dict[str, Any]:
        return dict(self.old_attrs)


@dataclass(frozen=True)
class Step:
    """One op of an inserted chain: ``kind`` with ``attrs``, reading the previous step's result."""

    kind: str
    attrs: Attrs = ()
    local: bool = False  # a local op a fix adds (charged by the cost model as memory traffic)

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)


@dataclass(frozen=True)
class Edit:
    rule: str = ""  # the pattern that proposed it (for explanations)

    def apply(self, program: Program) -> Program:
        raise NotImplementedError

    def describe(self, program: Program) -> str:
        raise NotImplementedError

    def resolve(self, program: Program) -> Change:
        """The edit in terms a source patcher can use (lines, kinds, attributes)."""
        raise NotImplementedError


@dataclass(frozen=True)
class InsertCollectives(Edit):
    value: str = ""
    steps: tuple[Step, ...] = ()
    mesh_dim: str = ""
    position: str = AFTER_PRODUCER
    consumer: int | None = None  # op index (BEFORE_CONSUMER)

    def index(self, program: Program) -> int:
        """Where the first new op goes in the op list."""
        if self.position == BEFORE_CONSUMER and self.consumer is not None:
            return self.consumer
        producer = _producer(program, self.value)
        return 0 if producer is None else producer + 1

    def anchor_line(self, program: Program) -> int | None:
        """The source line after which the new code belongs."""
        index = self.index(program)
        if self.position == BEFORE_CONSUMER:
            return _line_of(program, index - 1) if index > 0 else None
        producer = _producer(program, self.value)
        if producer is not None:
            return _line_of(program, producer)
        spec = next((s for s in program.inputs if s.name == self.value), None)
        return spec.span.line if spec is not None else None

    def new_names(self, program: Program) -> tuple[str, ...]:
        names, taken = [], set()
        for step in self.steps:
            name = _fresh(program, f"{self.value}_{_SHORT.get(step.kind, step.kind)}", taken)
            taken.add(name)
            names.append(name)
        return tuple(names)

    def apply(self, program: Program) -> Program:
        at = self.index(program)
        line = self.anchor_line(program)
        span = Span(line, program.source)
        names = self.new_names(program)
        new_ops, current = [], self.value
        for step, name in zip(self.steps, names):
            attrs = dict(step.attrs)
            if not step.local:
                attrs = {"mesh_dim": self.mesh_dim, **attrs}
            new_ops.append(Op((name,), step.kind, (current,), attrs, span))
            current = name
        ops = list(program.ops[:at]) + new_ops + [_rename(op, self.value, current) for op in program.ops[at:]]
        outputs = tuple(replace(out, name=current) if out.name == self.value else out for out in program.outputs)
        return replace(program, ops=tuple(ops), outputs=outputs)

    def describe(self, program: Program) -> str:
        line = self.anchor_line(program)
        where = (f"before {program.ops[self.consumer].kind} (line {_line_of(program, self.consumer)})"
                 if self.position == BEFORE_CONSUMER and self.consumer is not None
                 else f"after line {line}" if line else "at the start")
        value = label(program, self.value)
        if any(step.local for step in self.steps):
            return f"all-gather the partial values of {value} over {self.mesh_dim} and add them up locally {where}"
        chain = " + ".join(_describe_attrs(step.kind, step.attr_dict) for step in self.steps)
        return f"insert {chain} of {value} over {self.mesh_dim} {where}"

    @property
    def collectives(self) -> tuple[Step, ...]:
        return tuple(step for step in self.steps if not step.local)

    def resolve(self, program: Program) -> Change:
        first = self.collectives[0] if self.collectives else self.steps[0]
        consumer_line = (_line_of(program, self.consumer) if self.position == BEFORE_CONSUMER and
                         self.consumer is not None else None)
        return Change("insert", self.anchor_line(program), value=self.value, kind=first.kind,
                      mesh_dim=self.mesh_dim, attrs=first.attrs, steps=self.steps, target_line=consumer_line,
                      results=self.new_names(program))


_SHORT = {"all_reduce": "ar", "all_gather": "ag", "reduce_scatter": "rs", "all_to_all": "a2a", "broadcast": "bc",
          "reshape": "stack", "sum": "sum", "local_chunk": "chunk"}


@dataclass(frozen=True)
class ChangeCollective(Edit):
    op_index: int = -1
    kind: str | None = None  # None: keep
    set_attrs: Attrs = ()
    drop_attrs: tuple[str, ...] = ()

    def apply(self, program: Program) -> Program:
        op = program.ops[self.op_index]
        attrs = {k: v for k, v in op.attrs.items() if k not in self.drop_attrs}
        attrs.update(dict(self.set_attrs))
        ops = list(program.ops)
        ops[self.op_index] = replace(op, kind=self.kind or op.kind, attrs=attrs)
        return replace(program, ops=tuple(ops))

    def describe(self, program: Program) -> str:
        op = program.ops[self.op_index]
        changes = ([f"kind {op.kind} -> {self.kind}"] if self.kind and self.kind != op.kind else [])
        changes += [f"{k} {op.attrs.get(k, '(default)')} -> {v}" for k, v in self.set_attrs
                    if op.attrs.get(k) != v and not (self.kind and k in ("op", "dim"))]
        if self.kind and self.kind != op.kind:
            changes += [f"{k}={v}" for k, v in self.set_attrs if k != "mesh_dim"]
        line = op.span.line
        return f"change the {op.kind} of {label(program, op.args[0])}" + (f" at line {line}" if line else "") + \
            ": " + ", ".join(changes)


    def resolve(self, program: Program) -> Change:
        op = program.ops[self.op_index]
        new = self.apply(program).ops[self.op_index]
        return Change("change", op.span.line, value=op.args[0] if op.args else None,
                      result=op.results[0] if op.results else None, kind=new.kind, old_kind=op.kind,
                      mesh_dim=str(new.attr("mesh_dim")), attrs=tuple(new.attrs.items()),
                      old_attrs=tuple(op.attrs.items()), handle=op.attr("handle"))


@dataclass(frozen=True)
class RemoveCollective(Edit):
    op_index: int = -1

    def apply(self, program: Program) -> Program:
        op = program.ops[self.op_index]
        source, result = op.args[0], op.results[0]
        handle = op.attr("handle")
        ops = []
        for index, other in enumerate(program.ops):
            if index == self.op_index:
                continue
            if handle is not None and other.kind == "wait" and other.attr("handle") == handle and index > self.op_index:
                handle = None  # drop the first wait of this handle only
                continue
            ops.append(_rename(other, result, source))
        outputs = tuple(replace(out, name=source) if out.name == result else out for out in program.outputs)
        return replace(program, ops=tuple(ops), outputs=outputs)

    def describe(self, program: Program) -> str:
        op = program.ops[self.op_index]
        line = op.span.line
        return f"remove {_describe_attrs(op.kind, {k: v for k, v in op.attrs.items() if k != 'handle'})} of " \
               f"{label(program, op.args[0])} over {op.attr('mesh_dim')}" + (f" at line {line}" if line else "")


    def resolve(self, program: Program) -> Change:
        op = program.ops[self.op_index]
        return Change("remove", op.span.line, value=op.args[0], result=op.results[0], kind=op.kind,
                      old_kind=op.kind, mesh_dim=str(op.attr("mesh_dim")), old_attrs=tuple(op.attrs.items()),
                      handle=op.attr("handle"))


@dataclass(frozen=True)
class MoveWait(Edit):
    wait_index: int = -1
    before: int = -1  # op index (in the program before the move) the wait goes in front of

    def apply(self, program: Program) -> Program:
        ops = list(program.ops)
        wait = ops[self.wait_index]
        target = self.before
        del ops[self.wait_index]
        if self.wait_index < target:
            target -= 1
        ops.insert(target, replace(wait, span=Span(_line_of(program, self.before - 1), wait.span.file)
                                    if self.before > 0 else wait.span))
        return replace(program, ops=tuple(ops))

    def describe(self, program: Program) -> str:
        wait = program.ops[self.wait_index]
        reader = program.ops[self.before]
        return (f"move wait(handle={wait.attr('handle')}) from line {wait.span.line} to before "
                f"{reader.kind} (line {reader.span.line})")


    def resolve(self, program: Program) -> Change:
        wait = program.ops[self.wait_index]
        return Change("move_wait", wait.span.line, target_line=_line_of(program, self.before),
                      handle=str(wait.attr("handle")))


@dataclass(frozen=True)
class InsertWait(Edit):
    handle: str = ""
    before: int = -1  # op index; len(ops) = at the end

    def apply(self, program: Program) -> Program:
        ops = list(program.ops)
        line = _line_of(program, self.before - 1) if self.before > 0 else None
        ops.insert(self.before, Op((), "wait", (), {"handle": self.handle}, Span(line, program.source)))
        return replace(program, ops=tuple(ops))

    def describe(self, program: Program) -> str:
        if self.before < len(program.ops):
            reader = program.ops[self.before]
            return f"insert wait(handle={self.handle}) before {reader.kind} (line {reader.span.line})"
        return f"insert wait(handle={self.handle}) at the end"


    def resolve(self, program: Program) -> Change:
        issuer = next((op for op in program.ops if op.attr("handle") == self.handle and op.kind != "wait"), None)
        return Change("insert_wait", issuer.span.line if issuer is not None else None,
                      target_line=_line_of(program, self.before), handle=self.handle,
                      value=issuer.results[0] if issuer is not None and issuer.results else None)


def apply_all(program: Program, edits: tuple[Edit, ...]) -> Program:
    for edit in edits:
        program = edit.apply(program)
    return program

