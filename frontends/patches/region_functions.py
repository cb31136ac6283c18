"""Autograd-correct reductions for a plain ``torch.distributed`` file: Megatron's region pair, written in.

``dist.all_reduce(y)`` fixes a forward value but not its gradient: c10d's in-place collective has no
autograd kernel, so the input gradient of a tensor-parallel block stays a partial sum on every rank,
and the autograd-aware ``torch.distributed.nn.functional.all_reduce`` sums the (already replicated)
output gradient once per rank.  What tensor-parallel code uses instead is a pair of tiny
``autograd.Function`` classes (Megatron's ``reduce_from_tensor_model_parallel_region`` and
``copy_to_tensor_model_parallel_region``, picotron's and nanotron's own copies): all-reduce forward
with identity backward after the row-parallel product, identity forward with all-reduce backward on
the replicated input of the column-parallel product.  When a file has neither, these recipes add the
two classes (after its imports, spelled with its own ``torch``/``dist`` names and ``group=``) and use
them at the recorded line:

* ``reduce_region``  ``y = _ReduceFromRanks.apply(y)`` after the line, alone or with the function's
                     replicated inputs (its parameters used as the first operand of a matmul)
                     wrapped in ``_CopyToRanks.apply(x)``;
* ``copy_region``    a gradient that goes wrong at a matmul: its first operand wrapped in
                     ``_CopyToRanks.apply(x)``;
* ``guard_input``    the run names the input whose gradient differs (``gradient of w``) and the line it
                     goes wrong at: that input's reads on the line wrapped in the file's own copy (a
                     Megatron mapping, its identity-forward Function) or ``_CopyToRanks.apply(w)``.  A
                     data-parallel loss all-reduced with ``dist.all_reduce`` (no backward) leaves each
                     rank the gradient of its own batch rows; the guard sums them over the ranks.

Like every candidate, the patched text is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name

REDUCER, COPIER = "_ReduceFromRanks", "_CopyToRanks"

_CLASSES = '''class {reducer}({torch}.autograd.Function):
    """All-reduce forward, identity backward (Megatron's reduce_from_tensor_model_parallel_region)."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        {dist}.all_reduce(x{group})
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class {copier}({torch}.autograd.Function):
    """Identity forward, all-reduce backward (Megatron's copy_to_tensor_model_parallel_region)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.clone()
        {dist}.all_reduce(grad_output{group})
        return grad_output
'''


def _add_classes(editor: SourceEditor, group: str | None) -> tuple[str, str] | None:
    """Write the two classes before the file's first top-level function or class; their names."""
    torch, dist = editor.alias("torch"), editor.alias("torch.distributed")
    if torch is None or dist is None:
        return None
    anchor = next((s for s in editor.module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))), None)
    if anchor is None:
        return None
    reducer, copier = editor.fresh_name(REDUCER), editor.fresh_name(COPIER)
    code = _CLASSES.format(reducer=reducer, copier=copier, torch=torch, dist=dist,
                           group=f", group={group}" if group else "")
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    classes = [statement.with_changes(leading_lines=blank) for statement in cst.parse_module(code).body]
    editor.before.setdefault(anchor, []).extend(classes)
    editor.replace(anchor, lambda node: node.with_changes(leading_lines=[*blank, *[
        line for line in node.leading_lines if line.comment is not None]]))
    return reducer, copier


def _parameters(function: cst.CSTNode) -> set[str]:
    if not isinstance(function, cst.FunctionDef):
        return set()
    return {p.name.value for p in function.params.params if p.name.value not in ("self", "ctx")}


def _first_operands(node: cst.CSTNode) -> list[cst.Name]:
    """The first operand of each matmul in ``node`` (``x @ w``, ``torch.matmul(x, w)``, ``F.linear(x, w)``)."""
    out = []
    for found in m.findall(node, m.BinaryOperation(operator=m.MatrixMultiply()) | m.Call()):
        if isinstance(found, cst.Call):
            name = call_name(found)
            if name not in ("matmul", "mm", "linear", "bmm", "einsum") or not found.args:
                continue
            first = found.args[0].value if name != "einsum" or len(found.args) < 2 else found.args[1].value
        else:
            first = found.left
        if isinstance(first, cst.Name):
            out.append(first)
    return out


def _file_group(source: str, path: str) -> str | None:
    from .at_line import read_idioms

    return read_idioms(SourceEditor(source, path)).group


def reduce_region(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    from .at_line import MATMUL_OPS, _assigned, _returned, read_idioms

    probe = SourceEditor(source, path)
    idioms = read_idioms(probe)
    if idioms.mappings or idioms.reducers:
        return   # the file has its own reducing spelling: reduce_after uses it
    for guard_inputs in (True, False):
        editor = SourceEditor(source, path)
        statement = editor.statement_at(site.line)
        name, returned = _assigned(statement), _returned(statement)
        if name is None and returned is None:
            return
        names = _add_classes(editor, idioms.group)
        if names is None:
            return
        reducer, copier = names
        if name is not None:
            editor.insert_after(statement, f"{name} = {reducer}.apply({name})")
            what = f"all-reduce `{name}` after line {site.line} with an added {reducer} (identity backward)"
        else:
            editor.replace(returned.value, lambda node: cst.parse_expression(
                f"{reducer}.apply({cst.Module([]).code_for_node(node)})"))
            what = f"all-reduce the value returned on line {site.line} with an added {reducer} (identity backward)"
        guarded = []
        if guard_inputs:
            function = editor.function_of(statement)
            params = _parameters(function)
            for operand in _first_operands(function):
                if operand.value in params and editor.span(operand)[0] <= editor.span(statement)[1]:
                    editor.replace(operand, cst.parse_expression(f"{copier}.apply({operand.value})"))
                    guarded.append(operand.value)
            if not guarded:
                continue
            what += f", its input(s) {', '.join(f'`{g}`' for g in dict.fromkeys(guarded))} guarded with {copier} " \
                    f"(all-reduce of their gradient)"
        prior = (0 if site.op in MATMUL_OPS + ("partial",) and not site.gradient else 2) + (0 if guard_inputs else 1)
        yield what, editor.render(), prior


def copy_region(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    from .at_line import read_idioms

    probe = SourceEditor(source, path)
    idioms = read_idioms(probe)
    if idioms.mappings or idioms.copiers or not site.gradient:
        return
    count = len(_first_operands(probe.statement_at(site.line)))
    for index in range(count):
        editor = SourceEditor(source, path)
        statement = editor.statement_at(site.line)
        operand = _first_operands(statement)[index]
        names = _add_classes(editor, idioms.group)
        if names is None:
            return
        editor.replace(operand, cst.parse_expression(f"{names[1]}.apply({operand.value})"))
        yield (f"guard `{operand.value}` on line {site.line} with an added {names[1]} (identity forward, all-reduce "
               f"of its gradient)", editor.render(), 1)


def _reads(statement: cst.CSTNode, name: str) -> list[cst.Name]:
    """The loads of ``name`` in ``statement``: not an assignment's target, an attribute or a keyword."""
    skip = set()
    for node in m.findall(statement, m.Attribute() | m.Arg() | m.AssignTarget() | m.AugAssign()):
        if isinstance(node, cst.Attribute):
            skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            skip.add(id(node.keyword))
        elif isinstance(node, (cst.AssignTarget, cst.AugAssign)):
            skip.add(id(node.target))
    return [n for n in m.findall(statement, m.Name(value=name)) if id(n) not in skip]


def guard_input(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    from .at_line import copy_spellings, read_idioms

    name = getattr(site, "input", "")
    if not site.gradient or not name:
        return
    probe = SourceEditor(source, path)
    if not _reads(probe.statement_at(site.line), name) or name not in _parameters(
            probe.function_of(probe.statement_at(site.line))):
        return
    idioms = read_idioms(probe)
    spellings = [label for label, _ in copy_spellings(idioms, name)] or [None]
    for label in spellings:
        editor = SourceEditor(source, path)
        if label is None:
            names = _add_classes(editor, idioms.group)
            if names is None:
                return
            label, spelled = f"an added {names[1]}", f"{names[1]}.apply({name})"
        else:
            spelled = dict(copy_spellings(idioms, name))[label]
        for read in _reads(editor.statement_at(site.line), name):
            editor.replace(read, cst.parse_expression(spelled))
        yield (f"guard `{name}` on line {site.line} with {label} (identity forward, all-reduce of its gradient: "
               f"the gradient of `{name}` was each rank's own)", editor.render(), 0)
