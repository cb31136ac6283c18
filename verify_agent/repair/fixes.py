"""Verified source fixes: IR repair -> patch in the user's idioms -> translate again -> verify.

A fix is shown only when the *patched file* translates and verifies: the IR repair is
re-spelled by ``frontends.patches`` and the new text goes through the frontend and the
checker (``check_program``) like any other file, so what the user applies is what was proven.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from verifier.report import Fix, Report
from verifier.synthesis.cost import CostModel, program_cost
from verifier.synthesis.search import Budget, synthesize
from verifier.synthesis.symptoms import NotAnalysable, analyse

Progress = Optional[Callable[[str], None]]


@dataclass
class SourceFix:
    """A fix with everything ``fix --write`` and ``review`` need besides the diff."""

    description: str
    patched: str
    diff: str
    comm_cost: float
    report: Report  # the patched file's own verification
    seconds: float = 0.0  # from the start of the search until this fix was verified

    def as_fix(self) -> Fix:
        return Fix(self.description, self.diff, round(self.comm_cost, 3))


def _mesh_text(program) -> str | None:
    return ",".join(f"{name}={size}" for name, size in program.mesh.dims) if program is not None else None


def verify_source(patched: str, path: str, translation: Any, model: CostModel = CostModel()
                  ) -> tuple[Report | None, float]:
    """Translate and check a patched file the way the original was read; (report, comm cost)."""
    from frontends import translate_source
    from frontends.base import SourceError

    from verifier.check import check_program

    try:
        again = translate_source(patched, path, entry=translation.entry, mesh=_mesh_text(translation.program))
    except SourceError:
        return None, 0.0
    if again.program is None or again.unsupported:
        return None, 0.0
    report = check_program(again.program, path)
    try:
        analysis = analyse(again.program, with_real_sizes=True)
        cost = program_cost(again.program, analysis.real_shapes, analysis.placements, analysis.dtypes, model)
    except NotAnalysable:
        cost = 0.0
    return report, cost


def source_fixes(source: str, path: str, translation: Any, report: Report, progress: Progress = None, *,
                 top_k: int = 3, budget: Budget | None = None, model: CostModel = CostModel()) -> list[SourceFix]:
    """Verified source fixes, cheapest first (at most ``top_k``).

    The search's final check of a candidate *is* the check of its patched file: a candidate
    without a source spelling costs no verification, and the one check it gets is on what
    the user would apply.
    """
    from frontends.patches import CannotPatch, direct_patches, patch_source

    found: list[SourceFix] = []
    seen: dict[str, Report | None] = {}
    style = getattr(translation, "style", "explicit")

    def check(description: str, patched: str, diff: str) -> Report | None:
        if patched in seen:
            return seen[patched]
        checked, cost = verify_source(patched, path, translation, model)
        seen[patched] = checked
        if checked is not None and checked.verdict == "verified":
            found.append(SourceFix(description, patched, diff, cost, checked))
            if progress:
                progress(f"  patched file verifies: {description}")
        elif progress:
            progress(f"  patched file does not verify ({checked.verdict if checked else 'not translatable'}): "
                     f"{description}")
        return checked

    def verify_candidate(candidate) -> Report | None:
        steps = [(edit.resolve(before), before) for edit, before in candidate.history]
        try:
            patch = patch_source(source, path, style, steps, candidate.description)
        except CannotPatch as reason:
            if progress:
                progress(f"  no source spelling for: {candidate.description} ({reason})")
            return None
        return check(patch.description or candidate.description, patch.patched, patch.diff)

    program = getattr(translation, "program", None)
    too_large = _too_large_to_evaluate(program)
    if too_large and progress:
        progress(f"  no repair search: {too_large}")
    if program is not None and not too_large:
        synthesize(program, report, file=path, budget=budget or Budget(top_k=top_k), model=model, progress=progress,
                   verifier=verify_candidate)
    for patch in direct_patches(source, path, style):
        check(patch.description, patch.patched, patch.diff)
    found.sort(key=lambda fix: fix.comm_cost)
    return found[:top_k]


def _too_large_to_evaluate(program: Any) -> str | None:
    """Repair candidates are screened with real numbers at the file's sizes: refuse before allocating."""
    from verifier.ir import eval_dim

    from ..limits import MAX_INPUT_ELEMENTS

    if program is None:
        return None
    env = {name: value for name, value in program.dims.items() if value is not None}
    total = 0
    for spec in program.inputs:
        count = 1
        for dim in spec.shape:
            try:
                count *= int(eval_dim(dim, env))
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                return None  # symbolic sizes: screening picks small ones itself
        total += count
    if total > MAX_INPUT_ELEMENTS:
        return (f"the inputs have {total:,} elements at the file's sizes, more than the {MAX_INPUT_ELEMENTS:,} "
                f"verify-agent evaluates; make the sizes in example_inputs() smaller")
    return None


def suggest_fixes(source: str, path: str, translation: Any, report: Report, progress: Progress = None, *,
                  top_k: int = 3) -> list[Fix]:
    """Fixes for ``translate --fix``: each one's patched file translates and verifies; cheapest first."""
    return [fix.as_fix() for fix in source_fixes(source, path, translation, report, progress, top_k=top_k)]
