"""Candidate edits for asynchronous communication that is not waited on before its buffer is read.

A traced run names a read of a buffer an ``isend``/``irecv`` or an ``async_op=True`` collective is
still writing, or a handle that is never waited on.  Two edits answer it, in the file's own spelling:

* ``wait_handles``: a run of async calls whose handles are dropped (``dist.isend(kv, dst=nxt)`` as a
  statement) gets each handle named and waited on after the last of the run (all posted first, then
  all waited: the order ``isend``/``irecv`` pairs need); a named handle never waited on gets its
  ``wait()`` after the run it belongs to; ``batch_isend_irecv``'s list is waited on element by element;
* ``wait_before_read``: a named handle whose ``wait()`` comes after the line that reads the buffer
  gets its ``wait()`` moved before that line.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

_P2P = ("isend", "irecv")
_BATCH = "batch_isend_irecv"


def _is_async(call: cst.BaseExpression) -> bool:
    if not isinstance(call, cst.Call):
        return False
    name = call_name(call)
    return name in _P2P or name == _BATCH or any(
        a.keyword is not None and a.keyword.value == "async_op" and m.matches(a.value, m.Name("True"))
        for a in call.args)


def _async_statement(statement: cst.CSTNode) -> tuple[str | None, cst.Call] | None:
    """(handle name or None when dropped, the call) of ``[h =] <async call>``."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Expr) and _is_async(small.value):
        return None, small.value
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
            and _is_async(small.value):
        return small.targets[0].target.value, small.value
    return None


def _waited(scope: cst.CSTNode, handle: str) -> list[cst.SimpleStatementLine]:
    """The ``handle.wait()`` statements in ``scope``."""
    return [s for s in m.findall(scope, m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Attribute(
        value=m.Name(handle), attr=m.Name("wait"))))]))]


def _waits_of(handle: str, call: cst.Call) -> list[str]:
    if call_name(call) == _BATCH:
        return [f"for request in {handle}:\n    request.wait()\n"]
    return [f"{handle}.wait()"]


def _runs(editor: SourceEditor) -> list[list[cst.SimpleStatementLine]]:
    """Consecutive async statements of one block, each run with a dropped or never-waited handle."""
    runs = []
    for block in m.findall(editor.module, m.IndentedBlock()):
        current: list[cst.SimpleStatementLine] = []
        for statement in list(block.body) + [None]:
            found = _async_statement(statement) if statement is not None else None
            if found is not None:
                current.append(statement)
                continue
            if current and any(_unwaited(editor, s) for s in current):
                runs.append(current)
            current = []
    return runs


def _unwaited(editor: SourceEditor, statement: cst.SimpleStatementLine) -> bool:
    handle, _ = _async_statement(statement)
    return handle is None or not _waited(editor.function_of(statement), handle)


def wait_handles(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    for index, run in enumerate(_runs(probe)):
        first, last = probe.span(run[0])[0], probe.span(run[-1])[1]
        near = 0 if first <= site.line <= last else 2
        editor = SourceEditor(source, path)
        run = _runs(editor)[index]
        waits, named = [], []
        for statement in run:
            handle, call = _async_statement(statement)
            if handle is None:
                handle = editor.fresh_name("request" if call_name(call) in _P2P else "work")
                if call_name(call) == _BATCH:
                    handle = editor.fresh_name("requests")
                small = statement.body[0]
                editor.replace(small, cst.Assign(targets=[cst.AssignTarget(cst.Name(handle))], value=small.value))
                named.append(handle)
            elif _waited(editor.function_of(statement), handle):
                continue
            waits += _waits_of(handle, call)
        editor.insert_after(run[-1], *waits)
        what = ", ".join(f"`{h}`" for h in named) or "the handles"
        yield (f"wait on the async {'call' if len(run) == 1 else 'calls'} of line(s) {first}-{last} after they are "
               f"posted ({'naming ' + what if named else what + ' were never waited on'})", editor.render(), near)


def _reads_buffer(statement: cst.CSTNode, call: cst.Call) -> bool:
    """``statement`` reads the buffer the async ``call`` writes (its first argument, when a name)."""
    buffer = call.args[0].value if call.args else None
    if not isinstance(buffer, cst.Name):
        return True
    return bool(m.findall(statement, m.Name(buffer.value)))


def wait_before_read(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    try:
        reader = probe.statement_at(site.line)
    except Exception:
        return
    scope = probe.function_of(reader)
    read_at = probe.span(reader)[0]
    for statement in m.findall(scope, m.SimpleStatementLine()):
        found = _async_statement(statement)
        if found is None or found[0] is None or probe.span(statement)[1] >= read_at:
            continue
        handle, call = found
        if not _reads_buffer(reader, call):
            continue
        later = [w for w in _waited(scope, handle) if probe.span(w)[0] > read_at]
        earlier = [w for w in _waited(scope, handle) if probe.span(statement)[1] < probe.span(w)[0] < read_at]
        if not later or earlier:
            continue
        editor = SourceEditor(source, path)
        fresh_scope = editor.function_of(editor.statement_at(site.line))
        editor.insert_before(editor.statement_at(site.line), *_waits_of(handle, call))
        for wait in _waited(fresh_scope, handle):
            if editor.span(wait)[0] > read_at:
                editor.remove(wait)
        yield (f"wait on `{handle}` (line {probe.span(statement)[0]}) before line {site.line} reads its buffer "
               f"(moved from line {probe.span(later[0])[0]})", editor.render(), 0)
