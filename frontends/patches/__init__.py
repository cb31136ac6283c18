"""Source patches: an IR repair spelled in the user's own code, as a unified diff.

``patch_source(source, path, style, steps)`` takes the changes of one verified IR fix (each
with the program it applies to) and rewrites only the lines they need, with the idioms of
the file's style: plain ``torch.distributed`` calls (``explicit.py``), Megatron-core layer
flags and mapping functions (``megatron.py``), DTensor plan entries and placements
(``dtensor.py``).  Each style lists its recipes in a table; a Megatron or DTensor file falls
back to the explicit recipes for code written with ``torch.distributed`` directly.  A change
without a faithful spelling raises ``CannotPatch`` and the fix is not offered.

``direct_patches`` are the style idioms that are recognised in the source itself (a
``ColumnParallelLinear(gather_output=True)`` feeding ``RowParallelLinear(input_is_parallel=
True)``), for files the frontend cannot even translate as written.
"""
from __future__ import annotations

from dataclasses import dataclass

from verifier.ir import Program
from verifier.synthesis.edits import Change

from . import dtensor, explicit, megatron
from .editor import CannotPatch, SourceEditor, unified_diff
from .explicit import PatchContext

STYLE_RECIPES = {
    "explicit": (explicit.RECIPES,),
    "megatron": (megatron.RECIPES, explicit.RECIPES),
    "dtensor": (dtensor.RECIPES, explicit.RECIPES),
}


@dataclass(frozen=True)
class SourcePatch:
    path: str
    original: str
    patched: str
    description: str = ""

    @property
    def diff(self) -> str:
        return unified_diff(self.original, self.patched, self.path)


def apply_change(editor: SourceEditor, style: str, change: Change, program: Program,
                 synthetic: frozenset[str] = frozenset()) -> None:
    """Record one change on ``editor`` with the first recipe of the style that can spell it."""
    reasons = []
    tables = STYLE_RECIPES.get(style, STYLE_RECIPES["explicit"])
    if style != "explicit" and not editor.imports_module("torch.distributed"):
        tables = tables[:1]  # the file does not use torch.distributed itself: speak only its own idioms
    for table in tables:
        for applies, recipe in table:
            if not applies(change):
                continue
            state = editor.checkpoint()
            try:
                recipe(PatchContext(editor, program, change, synthetic))
                return
            except CannotPatch as reason:
                editor.restore(state)
                reasons.append(str(reason))
            except (ValueError, KeyError, IndexError, AttributeError, TypeError) as error:  # a recipe's blind spot
                editor.restore(state)
                reasons.append(f"{recipe.__name__}: {error.__class__.__name__}: {error}")
    raise CannotPatch("; ".join(reasons) or f"no recipe for {change.action} {change.kind or ''} in {style} code")


def patch_source(source: str, path: str, style: str, steps: list[tuple[Change, Program]],
                 description: str = "") -> SourcePatch:
    editor = SourceEditor(source, path)
    synthetic: set[str] = set()
    for change, program in steps:
        apply_change(editor, style, change, program, frozenset(synthetic))
        synthetic |= set(change.results)
    patched = editor.render()
    if patched == source:
        raise CannotPatch("the change leaves the file as it is")
    return SourcePatch(path, source, patched, "; ".join(editor.notes) or description)


def direct_patches(source: str, path: str, style: str) -> list[SourcePatch]:
    """Style idioms recognised in the source alone (each still has to verify before it is shown)."""
    table = {"megatron": megatron.DIRECT, "dtensor": dtensor.DIRECT}.get(style, ())
    found = []
    for finder in table:
        try:
            for description, editor in finder(source, path):
                patched = editor.render()
                if patched != source:
                    found.append(SourcePatch(path, source, patched, description))
        except CannotPatch:
            continue
    return found


__all__ = ["SourcePatch", "CannotPatch", "patch_source", "direct_patches", "apply_change", "unified_diff"]
