"""Which line bound the name an op reads: a line trace of the checked file's and the user's package's frames.

A collective dropped from ``output_ = reduce(output_parallel)`` leaves ``output_ = output_parallel``: a
line that runs no op.  The values first go wrong where ``output_`` is read next (the bias add two lines
below), but the reduction belongs after the line that bound ``output_``.  Torch cannot say which line
bound a Python name; the interpreter can: while the code runs, a trace function follows the frames of the
files being checked (no other frame is traced) and remembers, per frame, the last line that bound each
local name (assignments, ``for`` targets, ``with ... as``).  When an op runs, the names its statement
reads whose local value *is* one of the op's tensor operands, with the line that last bound them, are
kept on the op's span (``Span.bound``); the entry's ``return`` keeps the same for the values it hands
back.  The verifier decides from values whether that line is where the fault is.

Only frames of files the span finder counts as the user's are traced (``SpanFinder.checked``); a trace
function already set (a debugger, coverage) is left alone and nothing is kept.
"""
from __future__ import annotations

import ast
import linecache
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from .spans import SpanFinder


@dataclass(frozen=True)
class Statement:
    """A statement (or a compound statement's header) of a traced file: its first line, the local names
    it binds and the names it reads."""

    line: int
    binds: frozenset[str]
    reads: frozenset[str]
    bare: bool = False   # a call whose result nothing keeps (``dist.all_reduce(t)``, ``reduce_(t)``)
    # the names an assignment binds to a subscript of another value (``mine = layers[a:b]``, ``w = ws[i]``):
    # values picked out of a Python list or tuple, which no op records
    picks: frozenset[str] = frozenset()
    header: bool = False   # a compound statement's header (``if``, ``for``, ``while``, ``with``)
    # the first line of the innermost compound statement whose body holds this one (None: none in its function)
    block: int | None = None


def statements(filename: str) -> dict[int, Statement]:
    """Line -> the innermost statement (or header) covering it, for ``filename``'s source."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return {}
    table: dict[int, Statement] = {}
    blocks = {child: node.lineno for node in ast.walk(tree) if isinstance(node, _BLOCKS)
              for part in ("body", "orelse", "finalbody", "handlers") for child in getattr(node, part, ())}
    blocks.update({child: handler.lineno for handler in ast.walk(tree) if isinstance(handler, ast.ExceptHandler)
                   for child in handler.body})
    nodes = sorted((n for n in ast.walk(tree) if isinstance(n, ast.stmt)), key=lambda n: (n.lineno, -n.end_lineno))
    for node in nodes:   # outer statements first: an inner statement overrides its lines
        header = _header(node)
        if header is None:
            continue
        parts, last = header
        binds = frozenset(n.id for part in parts for n in ast.walk(part)
                          if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)))
        reads = frozenset(n.id for part in parts for n in ast.walk(part)
                          if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
        statement = Statement(node.lineno, binds, reads, isinstance(node, ast.Expr) and isinstance(node.value, ast.Call),
                              picks=_picks(node))
        statement = replace(statement, header=isinstance(node, _COMPOUND), block=blocks.get(node))
        for line in range(node.lineno, last + 1):
            table[line] = statement
    return table


def _picks(node: ast.stmt) -> frozenset[str]:
    """The names ``node`` binds to a subscript of a value (``mine = layers[a:b]``): a pick, by an index or a
    slice that is not a constant, out of a Python container."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(node.value, ast.Subscript):
        return frozenset()
    if all(isinstance(n, (ast.Constant, ast.Slice, ast.Tuple, ast.UnaryOp)) or not isinstance(n, ast.expr)
           for n in ast.walk(node.value.slice)):
        return frozenset()   # a constant index: the same pick on every rank
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return frozenset(t.id for t in targets if isinstance(t, ast.Name))


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)
# statements whose bodies hold statements (a function's body is no block of one: it is the frame)
_BLOCKS = _COMPOUND + (ast.Try, getattr(ast, "TryStar", ast.Try), getattr(ast, "Match", ast.If))


def _header(node: ast.stmt) -> tuple[list[ast.AST], int] | None:
    """The parts of ``node`` that run on its own lines, and its last such line (a compound statement's
    body is statements of its own)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
        return None
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target, node.iter], node.iter.end_lineno
    if isinstance(node, (ast.If, ast.While)):
        return [node.test], node.test.end_lineno
    if isinstance(node, (ast.With, ast.AsyncWith)):
        parts = [p for item in node.items for p in (item.context_expr, item.optional_vars) if p is not None]
        return parts, max(p.end_lineno for p in parts)
    if hasattr(node, "body") or hasattr(node, "cases"):   # match and other compound statements
        return None
    return [node], node.end_lineno


@dataclass
class _Frame:
    current: Statement | None = None
    bound: dict[str, int] = field(default_factory=dict)   # name -> the line that last bound it
    # a bare call running: (its span's line, within), and (variable, tensor, recorded value name) it reads
    reading: tuple[tuple[int | None, Any], list[tuple[str, Any, str]]] | None = None
    # the last statement that ran to its end (no header): its first line, and its ``Statement.block``
    previous: tuple[int, int | None] | None = None

    def finish(self) -> None:
        if self.current is not None:
            for name in self.current.binds:
                self.bound[name] = self.current.line
            if not self.current.header:
                self.previous = (self.current.line, self.current.block)
        self.current = None


class LineTrace:
    """The trace of one run: per traced frame, which line last bound each local name."""

    def __init__(self, spans: SpanFinder) -> None:
        self._spans = spans
        self._traced: dict[Any, bool] = {}          # code object -> is a file being checked
        self._tables: dict[str, dict[int, Statement]] = {}
        self._frames: dict[int, _Frame] = {}
        self.returned: dict[Any, tuple[int, list[tuple[Any, str, int]]]] = {}   # code -> (line, [(value, name, bound at)])
        self.active = False
        # recorded value name -> (variable, line, within) of the last bare call that read that value and
        # left it as it was (no write named it anew): where an in-place collective that did nothing was
        self.left: dict[str, tuple[str, int | None, Any]] = {}
        self.namer = None   # tensor -> the recorder's name of its current value (None: not recorded)

    def __enter__(self) -> "LineTrace":
        if sys.gettrace() is None:
            sys.settrace(self._global)
            self.active = True
        return self

    def __exit__(self, *exc) -> bool:
        if self.active:
            sys.settrace(None)
            self.active = False
        self._frames.clear()
        return False

    def _statement(self, filename: str, line: int) -> Statement | None:
        table = self._tables.get(filename)
        if table is None:
            table = self._tables[filename] = statements(filename)
        return table.get(line)

    def _global(self, frame, event, arg):
        code = frame.f_code
        traced = self._traced.get(code)
        if traced is None:
            traced = self._traced[code] = self._spans.checked(code.co_filename)
        if not traced:
            return None
        self._frames[id(frame)] = _Frame()
        return self._local

    def _local(self, frame, event, arg):
        state = self._frames.get(id(frame))
        if state is None:   # a generator resumed: what it bound before is not known
            state = self._frames[id(frame)] = _Frame()
        if event == "line":
            statement = self._statement(frame.f_code.co_filename, frame.f_lineno)
            if statement is not state.current:
                self._left_by(state)
                state.finish()
                state.current = statement
                if statement is not None and statement.bare and statement.reads and self.namer is not None:
                    self._reading(frame, state)
        elif event == "return":
            statement = self._statement(frame.f_code.co_filename, frame.f_lineno)
            local = frame.f_locals if statement is not None else {}
            self.returned[frame.f_code] = (frame.f_lineno, [
                (local[name], name, state.bound[name]) for name in sorted(statement.reads if statement else ())
                if name in state.bound and name in local and statement.line != state.bound[name]])
            self._frames.pop(id(frame), None)
        return self._local

    def _reading(self, frame, state: _Frame) -> None:
        """A bare call starts: the tensors it reads through local names, with their values' names now."""
        import torch

        local = frame.f_locals
        held = [(name, local[name]) for name in sorted(state.current.reads)
                if isinstance(local.get(name), torch.Tensor)]
        named = [(name, tensor, self.namer(tensor)) for name, tensor in held]
        named = [entry for entry in named if entry[2] is not None]
        if named:
            span = self._spans.span()   # the statement's first line, in this frame or the checked file's
            if span.within is not None:
                state.reading = ((span.line, (span.within[0], state.current.line)), named)
            else:
                state.reading = ((state.current.line, None), named)

    def _left_by(self, state: _Frame) -> None:
        """The bare call that ran ended: a tensor it read whose value no write named anew was left as it
        was (an in-place collective there did nothing)."""
        if state.reading is None:
            return
        (line, within), named = state.reading
        state.reading = None
        for name, tensor, value in named:
            if self.namer(tensor) == value:
                self.left[value] = (name, line, within)

    def left_unwritten(self, value: str) -> tuple[str, int | None, Any] | None:
        """(variable, line, within) of the last bare call that read ``value`` and left it unwritten."""
        return self.left.get(value)

    def reads(self, frame, tensors: list[Any]) -> list[tuple[Any, str, int]]:
        """For each of ``tensors`` that the statement running in ``frame`` reads through a local name
        bound on an earlier line of the frame: (tensor, name, that line).  A tensor under several such
        names bound on different lines is left out (which one the op read is not known)."""
        state = self._frames.get(id(frame)) if self.active and frame is not None else None
        if state is None or state.current is None or not state.current.reads:
            return []
        local = frame.f_locals
        found = []
        for tensor in tensors:
            names = sorted(n for n in state.current.reads if n in state.bound and local.get(n) is tensor)
            lines = {state.bound[n] for n in names}
            if len(lines) == 1 and lines != {state.current.line}:
                found.append((tensor, names[0], lines.pop()))
        return found

    def picked(self, frame, tensors: list[Any]) -> list[tuple[Any, str, int]]:
        """For each of ``tensors`` that the statement running in ``frame`` reads as a value an earlier line
        picked out of a Python list or tuple by a subscript (``Statement.picks``): (tensor, the variable
        that line bound, the line).  The variable holds the tensor itself (``w = ws[rank]``) or a list or
        tuple holding it (``mine = layers[a:b]``, then ``for w in mine``); a comprehension's frame looks in
        the frame that runs it too.  A tensor picked on several lines is left out."""
        frames = []
        while frame is not None and self.active and len(frames) < 2:
            state = self._frames.get(id(frame))
            if state is None or state.current is None:
                break
            frames.append((frame, state))
            if not frame.f_code.co_name.startswith("<"):   # <listcomp>, <genexpr>: runs in its maker's frame
                break
            frame = frame.f_back
        if not frames:
            return []
        current = frames[0][1].current.line
        found = []
        for tensor in tensors:
            hits = set()
            for frame, state in frames:
                local = frame.f_locals
                for name, line in state.bound.items():
                    if line == current or name not in local:
                        continue
                    statement = self._statement(frame.f_code.co_filename, line)
                    if statement is None or name not in statement.picks:
                        continue
                    value = local[name]
                    if value is tensor or (isinstance(value, (list, tuple)) and any(v is tensor for v in value)):
                        hits.add((name, line))
            if len({line for _, line in hits}) == 1:
                found.append((tensor, *sorted(hits)[0]))
        return found

    def ran_before(self, frame) -> tuple[int, int | None] | None:
        """The last statement (not a compound statement's header) that ``frame`` ran before the statement it
        runs now: its first line and the first line of the compound statement whose body holds it (None: the
        function's own body).  A write missing before this statement's read may go after it."""
        state = self._frames.get(id(frame)) if self.active and frame is not None else None
        return state.previous if state is not None and state.current is not None else None

    def returned_by(self, code: Any, value: Any) -> tuple[str, int] | None:
        """The name ``code``'s last ``return`` handed ``value`` back under, and the line that bound it."""
        _, entries = self.returned.get(code, (None, []))
        hits = {(name, line) for held, name, line in entries if held is value}
        return hits.pop() if len(hits) == 1 else None
