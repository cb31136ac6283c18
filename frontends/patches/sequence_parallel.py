"""Candidate edit for a norm that runs on sequence shards with unmarked parameters (Megatron-core).

Under Megatron's sequence parallelism a LayerNorm (or RMSNorm) sees only its rank's tokens, so
its weight and bias gradients are partial: Megatron's gradient finalisation all-reduces them over
the tensor-parallel group only for parameters marked ``sequence_parallel`` (its own norms do
``setattr(param, "sequence_parallel", config.sequence_parallel)``).  ``mark_sequence_parallel``
marks the parameters of a norm module a file builds itself (``self.norm = torch.nn.LayerNorm(...)``)
in a file that uses sequence parallelism, the way Megatron's norms do.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

_NORMS = ("LayerNorm", "RMSNorm", "FusedLayerNorm", "GroupNorm")
_SEQUENCE_PARALLEL = ("scatter_to_sequence_parallel_region", "gather_from_sequence_parallel_region",
                      "reduce_scatter_to_sequence_parallel_region")


def _norms(editor: SourceEditor) -> list[tuple[cst.SimpleStatementLine, str, bool]]:
    """(statement, ``self.name``, the enclosing function takes ``config``) of each norm module built."""
    found = []
    for statement in m.findall(editor.module, m.SimpleStatementLine(body=[m.Assign(
            targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))], value=m.Call())])):
        assign = statement.body[0]
        if call_name(assign.value) not in _NORMS:
            continue
        function = editor.function_of(statement)
        takes_config = isinstance(function, cst.FunctionDef) and any(
            p.name.value == "config" for p in function.params.params)
        found.append((statement, editor.code(assign.targets[0].target), takes_config))
    return found


def mark_sequence_parallel(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    if not any(call_name(call) in _SEQUENCE_PARALLEL for call in m.findall(probe.module, m.Call())):
        return
    for index, (statement, module, takes_config) in enumerate(_norms(probe)):
        if f"{module}.weight.sequence_parallel" in source or f'"sequence_parallel"' in source:
            continue   # marked already (one way or another): not this recipe's bug
        editor = SourceEditor(source, path)
        target = _norms(editor)[index][0]
        value = "config.sequence_parallel" if takes_config else "True"
        param = editor.fresh_name("param")
        editor.insert_after(target, f'for {param} in {module}.parameters():\n'
                                    f'    setattr({param}, "sequence_parallel", {value})\n')
        yield (f"mark the parameters of `{module}` (line {probe.line_of(statement)}) sequence_parallel, as "
               f"Megatron's norms do: their gradients are all-reduced over the tensor-parallel group",
               editor.render(), 0 if site.gradient else 2)
