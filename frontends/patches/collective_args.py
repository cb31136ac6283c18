"""Candidate edits of a call's arguments at a recorded line: a collective's reduce op, a ``dim=``.

* ``change_op``   a reducing collective on the line with ``op=ReduceOp.X``: another op (SUM, AVG,
                  MAX), or the keyword dropped (c10d's default is SUM);
* ``dim_keyword`` any call on the line with an integer ``dim=`` (``gather_dim=``,
                  ``scatter_dimension=``, ``split_dim=``, ``concat_dim=``): the neighbouring dims,
                  0 and -1 (``at_line.change_dim`` covers the positional dims of cat/split/chunk);
* ``unwrap_twice`` a call applied to its own result (``Gather.apply(Gather.apply(x))``,
                  ``reduce(reduce(x))``): applied once.

Candidates are text only; each is traced, proven and run on real ranks before it is shown.
"""
from __future__ import annotations

from typing import Iterator

import libcst as cst
import libcst.matchers as m

from .editor import SourceEditor, call_name, int_literal

REDUCING = ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base",
            "all_reduce_coalesced")
OPS = ("SUM", "AVG", "MAX")
DIM_KEYWORDS = ("dim", "gather_dim", "scatter_dimension", "split_dim", "concat_dim")


def _calls(source: str, path: str, line: int) -> tuple[SourceEditor, list[cst.Call]]:
    editor = SourceEditor(source, path)
    return editor, list(m.findall(editor.statement_at(line), m.Call()))


def change_op(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    prior = 0 if site.op.startswith(("all_reduce", "reduce")) else 2
    _, calls = _calls(source, path, site.line)
    for index, call in enumerate(calls):
        if call_name(call) not in REDUCING:
            continue
        keyword = next((a for a in call.args if a.keyword is not None and a.keyword.value == "op"), None)
        if keyword is None or not isinstance(keyword.value, cst.Attribute):
            continue
        old = keyword.value.attr.value
        for new in (*[o for o in OPS if o != old], None):
            editor, fresh = _calls(source, path, site.line)
            this = fresh[index]
            arg = next(a for a in this.args if a.keyword is not None and a.keyword.value == "op")
            if new is None:
                if old == "SUM":
                    continue
                kept = [a for a in this.args if a is not arg]
                kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                editor.replace(this, this.with_changes(args=kept))
                what = f"`{call_name(call)}` on line {site.line}: op {old} -> the default SUM"
            else:
                editor.replace(arg.value, arg.value.with_changes(attr=cst.Name(new)))
                what = f"`{call_name(call)}` on line {site.line}: op {old} -> {new}"
            yield what, editor.render(), prior


def dim_keyword(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    from .at_line import LAYOUT_OPS

    prior = 1 if site.op in LAYOUT_OPS or site.op.startswith(("all_", "reduce_scatter")) else 3
    _, calls = _calls(source, path, site.line)
    for index, call in enumerate(calls):
        for arg_index, arg in enumerate(call.args):
            if arg.keyword is None or arg.keyword.value not in DIM_KEYWORDS:
                continue
            old = int_literal(arg.value)
            if old is None:
                continue
            for new in dict.fromkeys((old + 1, old - 1, 0, -1, 1)):
                if new == old:
                    continue
                editor, fresh = _calls(source, path, site.line)
                target = fresh[index].args[arg_index]
                editor.replace(target.value, cst.parse_expression(str(new)))
                yield (f"`{call_name(call)}` on line {site.line}: {arg.keyword.value}={old} -> {new}", editor.render(),
                       prior)


def unwrap_twice(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    editor, calls = _calls(source, path, site.line)
    for index, call in enumerate(calls):
        inner = call.args[0].value if len(call.args) == 1 else None
        if not isinstance(inner, cst.Call) or editor.code(inner.func) != editor.code(call.func):
            continue
        editor, fresh = _calls(source, path, site.line)
        editor.replace(fresh[index], fresh[index].args[0].value)
        yield (f"`{editor.code(call.func)}` on line {site.line} applied once, not to its own result",
               editor.render(), 0)


MAPPINGS = ("scatter_to_sequence_parallel_region", "gather_from_sequence_parallel_region",
            "copy_to_tensor_model_parallel_region", "reduce_from_tensor_model_parallel_region",
            "scatter_to_tensor_model_parallel_region", "gather_from_tensor_model_parallel_region",
            "reduce_scatter_to_sequence_parallel_region")
# a mapping and the one that undoes it (a file that uses one and lacks the other most likely lost it)
PARTNERS = {"scatter_to_sequence_parallel_region": ("gather_from_sequence_parallel_region",),
            "gather_from_sequence_parallel_region": ("scatter_to_sequence_parallel_region",
                                                     "reduce_scatter_to_sequence_parallel_region"),
            "reduce_scatter_to_sequence_parallel_region": ("gather_from_sequence_parallel_region",),
            "copy_to_tensor_model_parallel_region": ("reduce_from_tensor_model_parallel_region",),
            "reduce_from_tensor_model_parallel_region": ("copy_to_tensor_model_parallel_region",),
            "scatter_to_tensor_model_parallel_region": ("gather_from_tensor_model_parallel_region",),
            "gather_from_tensor_model_parallel_region": ("scatter_to_tensor_model_parallel_region",)}
_MAPPING_MODULES = ("megatron.core.tensor_parallel", "megatron.core.tensor_parallel.mappings",
                    "fairscale.nn.model_parallel.mappings")


def _mapping_module(editor: SourceEditor) -> str | None:
    """The file's local name for a module of Megatron-style mapping functions."""
    return next((local for local, path in editor.imports.items()
                 if path in _MAPPING_MODULES and not local.startswith("*")), None)


def mapping_spellings(editor: SourceEditor) -> dict[str, str]:
    """Mapping function -> how this file calls it: ``module.function`` through a module it imports,
    or the local name of a function it imports from one (``from ...mappings import reduce_from_...``)."""
    module = _mapping_module(editor)
    out = {function: f"{module}.{function}" for function in MAPPINGS} if module is not None else {}
    for local, path in editor.imports.items():
        head, _, function = path.rpartition(".")
        if function in MAPPINGS and head in _MAPPING_MODULES and not local.startswith("*"):
            out.setdefault(function, local)
    return out


def _matmul_arguments(statement: cst.CSTNode) -> list[cst.BaseExpression]:
    """``h @ w`` passed straight to a call on the line (``F.silu(h @ w)``): a partial sum a non-linear
    function reads, where a reduction between the two is missing."""
    return [arg.value for call in m.findall(statement, m.Call()) for arg in call.args
            if arg.keyword is None and isinstance(arg.value, cst.BinaryOperation)
            and isinstance(arg.value.operator, cst.MatrixMultiply)]


def wrap_mapping(source: str, path: str, site) -> Iterator[tuple[str, str, int]]:
    """A value passed on unmapped through one of the file's mapping functions (a scatter, gather,
    copy or reduce that is missing there): ``x = y`` in the function of the line, up to the line; at
    the line itself also a returned name (``return out``: a gather of the output, its gradient split,
    not reduce-scattered, when the output is the caller's whole tensor) and a matmul a call reads
    (``F.silu(h @ w)``: the reduction before the non-linear function)."""
    probe = SourceEditor(source, path)
    spellings = mapping_spellings(probe)
    if not spellings:
        return
    statement = probe.statement_at(site.line)
    scope = probe.function_of(statement)
    if scope is probe.module:
        return
    plain = [s for s in m.findall(scope, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(
        target=m.Name())], value=m.Name())])) if probe.span(s)[0] <= probe.span(statement)[1]]
    used = {name for call in m.findall(probe.module, m.Call()) for name in MAPPINGS if call_name(call) == name}

    def rank(function: str) -> int:   # 0: the missing partner of a mapping the file uses; 2: one it uses
        return 2 if function in used else 0 if any(f in used for f in PARTNERS[function]) else 1

    for target in plain:
        line = probe.line_of(target)
        value = probe.code(target.body[0].value.with_changes(lpar=[], rpar=[]))
        for function in sorted(spellings, key=rank):
            if rank(function) > (1 if line == site.line else 0):
                continue   # elsewhere only the missing partner of a mapping the file uses
            editor = SourceEditor(source, path)
            fresh = editor.statement_at(line)
            editor.replace(fresh.body[0].value, cst.parse_expression(f"{spellings[function]}({value})"))
            yield (f"`{value}` on line {line} passed through {spellings[function]}", editor.render(),
                   (0 if line == site.line else 1) + rank(function))
    yield from _wrap_at_line(source, path, site.line, spellings, rank)


def _wrap_at_line(source: str, path: str, line: int, spellings: dict[str, str], rank) -> Iterator[tuple[str, str, int]]:
    probe = SourceEditor(source, path)
    statement = probe.statement_at(line)
    small = statement.body[0] if len(statement.body) == 1 else None
    if isinstance(small, cst.Return) and isinstance(small.value, cst.Name):
        value = small.value.value
        for function in sorted(spellings, key=rank):
            if function not in _OUTPUT_MAPPINGS or rank(function) > 1:
                continue   # an output is gathered or reduced, by a mapping the file does not use there yet
            variants = [f"{spellings[function]}({value})"]
            if function == "gather_from_sequence_parallel_region":
                variants.insert(0, f"{spellings[function]}({value}, tensor_parallel_output_grad=False)")
            for spelled in variants:
                editor = SourceEditor(source, path)
                editor.replace(_returned_value(editor, line), cst.parse_expression(spelled))
                yield (f"the value `{value}` returned on line {line} passed through {spellings[function]}"
                       + (" (its gradient split, not reduce-scattered)" if "output_grad=False" in spelled else ""),
                       editor.render(), rank(function))
    for index, operand in enumerate(_matmul_arguments(statement)):
        for function in ("reduce_from_tensor_model_parallel_region",):
            if function not in spellings:
                continue
            editor = SourceEditor(source, path)
            target = _matmul_arguments(editor.statement_at(line))[index]
            code = editor.code(target.with_changes(lpar=[], rpar=[]))
            editor.replace(target, cst.parse_expression(f"{spellings[function]}({code})"))
            yield (f"`{code}` on line {line} reduced by {spellings[function]} before the call that reads it",
                   editor.render(), 0)


_OUTPUT_MAPPINGS = ("gather_from_sequence_parallel_region", "gather_from_tensor_model_parallel_region",
                    "reduce_from_tensor_model_parallel_region")


def _returned_value(editor: SourceEditor, line: int) -> cst.BaseExpression:
    return editor.statement_at(line).body[0].value
