"""Candidate edit for positions built inside a shard where the code needs global ones.

Context-parallel attention masks compare the *global* position of each local query with the key
positions: ``rank * chunk + torch.arange(chunk)``.  Written as ``torch.arange(chunk)`` (with
``chunk = SEQ // world``) it is the position inside the shard, right on one rank only.
``global_positions`` adds the shard's offset, ``rank * chunk``, in the file's own names.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

import re
from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

_RANK = re.compile(r"^(\w+_)?rank$")
_LOCAL = re.compile(r"//\s*\(?\s*\w*(world|size|num_ranks|nranks|cp|sp)\w*", re.I)


def _names_bound(editor: SourceEditor, scope: cst.CSTNode) -> dict[str, cst.CSTNode | None]:
    """Names bound in ``scope`` (parameters and assignment targets) -> the value assigned (None: unknown)."""
    bound: dict[str, cst.CSTNode | None] = {}
    if isinstance(scope, cst.FunctionDef):
        for param in scope.params.params:
            bound[param.name.value] = None
    for assign in m.findall(scope, m.Assign()):
        for target in assign.targets:
            if isinstance(target.target, cst.Name):
                bound[target.target.value] = assign.value
            elif isinstance(target.target, cst.Tuple):
                values = assign.value.elements if isinstance(assign.value, cst.Tuple) else []
                for i, element in enumerate(target.target.elements):
                    if isinstance(element.value, cst.Name):
                        bound[element.value.value] = values[i].value if i < len(values) else None
    return bound


def _local_aranges(editor: SourceEditor) -> list[tuple[cst.Call, str, str]]:
    """(arange call, rank name, local length code) of each ``arange(n)`` over a shard's length that
    is not offset by the rank."""
    found = []
    for call in m.findall(editor.module, m.Call()):
        if call_name(call) != "arange" or len(call.args) != 1 or call.args[0].keyword is not None:
            continue
        scope = editor.function_of(call)
        bound = _names_bound(editor, scope)
        ranks = [n for n in bound if _RANK.match(n)]
        if not ranks:
            continue
        length = call.args[0].value
        code = editor.code(length)
        value = bound.get(code) if isinstance(length, cst.Name) else length
        if value is None or not _LOCAL.search(editor.code(value)):
            continue
        parent = editor.parents.get(call)
        if isinstance(parent, cst.BinaryOperation) and any(r in editor.code(parent) for r in ranks):
            continue   # already offset
        found.append((call, ranks[0], code))
    return found


def global_positions(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    for index, (call, rank, length) in enumerate(_local_aranges(probe)):
        line = probe.line_of(call)
        near = 1 if abs(line - site.line) <= 4 else 3
        editor = SourceEditor(source, path)
        target = _local_aranges(editor)[index][0]
        code = editor.code(target)
        editor.replace(target, cst.parse_expression(f"({rank} * {length} + {code})"))
        text = editor.render().replace(f"= ({rank} * {length} + {code})\n", f"= {rank} * {length} + {code}\n")
        yield (f"positions on line {line} made global: `{rank} * {length} + {code}` (the shard's offset added)",
               text, near)
