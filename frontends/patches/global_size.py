"""Candidate edit for a rank's own size used where the whole size is meant.

A mean over a sharded dimension divides a *reduced* sum by the size of the whole dimension; code
that divides by the size of its own shard (``sum_logits / part`` with ``part =
local_logits.size(-1)``) is right on one rank and wrong by the world size on more.
``global_size`` multiplies such a divisor by the world size on the line the run names:
``sum_logits / (part * dist.get_world_size())``.  A divisor is a shard size when it is assigned in
the function from a tensor's ``.size(...)``/``.shape[...]``/``.numel()`` or is named like one
(``part``, ``local_*``, ``per_rank``, ``shard_*``, ``chunk``); a world size itself never is.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

import re
from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor

_SHARD_NAME = re.compile(r"^(part|partition\w*|\w*_part|local\w*|\w*_local|per_rank\w*|shard\w*|\w*_shard|chunk\w*)$")
_SIZE_READ = re.compile(r"\.size\(|\.shape\b|\.numel\(\)")


def _shard_sizes(editor: SourceEditor, scope: cst.CSTNode) -> set[str]:
    names = set()
    for assign in m.findall(scope, m.Assign(targets=[m.AssignTarget(target=m.Name())])):
        name = assign.targets[0].target.value
        if _SIZE_READ.search(editor.code(assign.value)) or _SHARD_NAME.match(name):
            names.add(name)
    return names


def global_size(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    from .at_line import _is_world, _statement, _world_spelling, read_idioms

    editor, statement = _statement(source, path, site.line)
    sizes = _shard_sizes(editor, editor.function_of(statement))
    divisions = [d for d in m.findall(statement, m.BinaryOperation(operator=m.Divide()))
                 if isinstance(d.right, cst.Name) and d.right.value in sizes and not _is_world(editor, d.right)]
    world = _world_spelling(editor, statement, read_idioms(editor)) if divisions else None
    if world is None:
        return
    for index in range(len(divisions)):
        editor, statement = _statement(source, path, site.line)
        target = [d for d in m.findall(statement, m.BinaryOperation(operator=m.Divide()))
                  if isinstance(d.right, cst.Name) and d.right.value in sizes][index]
        size = target.right.value
        editor.replace(target.right, cst.parse_expression(f"({size} * {world})"))
        yield (f"divide by the whole size on line {site.line}: `/ {size}` -> `/ ({size} * {world})` "
               f"({size} is one rank's share)", editor.render(), 1 if site.op in ("div", "true_divide") else 2)
