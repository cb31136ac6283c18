"""Candidate edit for a gather buffer no collective fills: the all-gather that belongs there, restored.

``pieces = [torch.empty_like(t) for _ in range(world)]`` is how code allocates the outputs of an
all-gather; read (``torch.cat(pieces, ...)``) without any collective writing into it, every rank
concatenates uninitialised memory (or zeros): the collective was dropped.  ``fill_gather_buffer``
writes it back after the allocation, in the file's spelling: ``dist.all_gather(pieces, t)``, or the
autograd-aware ``torch.distributed.nn.functional.all_gather`` when gradients must flow through it.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

_ALLOCATORS = ("empty_like", "zeros_like")
_FILLERS = ("all_gather", "all_gather_into_tensor", "all_gather_object", "all_to_all", "recv", "irecv", "broadcast",
            "gather", "scatter")


def _buffers(editor: SourceEditor) -> list[tuple[cst.Assign, str, cst.BaseExpression]]:
    """(assignment, list name, the tensor each piece is shaped like) of each unfilled gather buffer."""
    found = []
    for assign in m.findall(editor.module, m.Assign(targets=[m.AssignTarget(target=m.Name())],
                                                    value=m.ListComp(elt=m.Call()))):
        elt = assign.value.elt
        if call_name(elt) not in _ALLOCATORS or not elt.args:
            continue
        name = assign.targets[0].target.value
        scope = editor.function_of(assign)
        filled = any(call_name(call) in _FILLERS and any(m.matches(arg.value, m.Name(name)) for arg in call.args)
                     for call in m.findall(scope, m.Call()))
        read = any(m.matches(node, m.Name(name)) for call in m.findall(scope, m.Call()) for arg in call.args
                   for node in [arg.value])
        if not filled and read:
            found.append((assign, name, elt.args[0].value))
    return found


def fill_gather_buffer(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    if not (probe.imports_module("torch.distributed") or probe.alias("torch.distributed")):
        return
    for index, (assign, name, like) in enumerate(_buffers(probe)):
        line = probe.line_of(assign)
        near = 0 if abs(line - site.line) <= 3 else 1
        for autograd in (False, True):
            editor = SourceEditor(source, path)
            statement = editor.statement_at(line)
            shaped = editor.code(_buffers(editor)[index][2])
            if autograd:
                torch = editor.alias("torch")
                if torch is None:
                    continue
                editor._add_import_line("import torch.distributed.nn.functional")
                editor.insert_after(statement, f"{name} = list({torch}.distributed.nn.functional.all_gather({shaped}))")
                how = "autograd-aware torch.distributed.nn"
            else:
                dist = editor.need("torch.distributed")
                editor.insert_after(statement, f"{dist}.all_gather({name}, {shaped})")
                how = "torch.distributed"
            yield (f"fill `{name}` (allocated on line {line}, read without a collective) with an all-gather of "
                   f"`{shaped}` ({how})", editor.render(), 1 + near + autograd)
