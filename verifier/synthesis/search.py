"""Beam search over edits, cheapest verified repair first.

A candidate is the program after a short sequence of edits proposed by the pattern table
(``patterns.py``) for the symptoms of the program before them.  Each candidate is screened
cheaply — shapes, placement propagation, the async scan, its communication cost — and, in
cost order, by one concrete NumPy evaluation against the single-device program.  Those that
pass are verified for real, cheapest first: on large programs a slice around the edit first
(``slicing.py``), then always the whole program with ``check_program``; only a ``verified``
verdict makes a fix.  The next round expands the ``beam`` best candidates by (remaining
violations, communication cost), and only those that could still undercut the best fix.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..check import check_program
from ..engine import EngineError
from ..equivalence import random_inputs, run_concrete
from ..ir import Program
from ..report import ERROR, Report
from ..text_format import print_program
from .cost import CostModel, program_cost
from .edits import Change, Edit, InsertCollectives
from .patterns import RULES, Rule, candidate_edits
from .slicing import slice_around
from .symptoms import (DIVERGENCE, Analysis, NotAnalysable, Symptom, analyse, async_symptoms, divergence_symptoms,
                       placement_symptoms)

Progress = Optional[Callable[[str], None]]
# A custom final check: the candidate's verification report, or None when the candidate cannot
# be used at all (e.g. no source spelling) — then no check is spent on it.
Verifier = Callable[["Candidate"], Optional[Report]]

SLICE_ABOVE_OPS = 150  # programs at least this long get a sliced check before the full one


@dataclass(frozen=True)
class Budget:
    beam: int = 6
    max_edits: int = 3
    max_checks: int = 24  # full verifications (check_program) at most
    top_k: int = 3
    first_only: bool = False
    seconds: float | None = None


@dataclass
class Screening:
    """The cheap pre-filter, in two stages: shapes, placements and cost at once; the concrete
    NumPy run against the single-device program (``concrete``) only when the search needs it —
    for the candidates it is about to verify, in cost order, and for the next round's beam."""

    analysis: Analysis
    symptoms: list[Symptom]
    cost: float
    mismatch: bool | None = None  # None: not run yet
    runnable: bool = True

    @property
    def violations(self) -> int:
        return len(self.symptoms) + int(bool(self.mismatch))

    @property
    def async_clean(self) -> bool:
        return not any(s.kind in ("early-read", "unwaited") for s in self.symptoms)

    @property
    def passes(self) -> bool:
        """Worth a real check: the single-device comparison agrees and no handle is misused.

        Placement symptoms alone do not block: a rule can be stricter than needed (an
        all-reduce(sum) of averaged partials divided afterwards) and the checker decides.
        """
        self.concrete()
        return self.runnable and not self.mismatch and self.async_clean

    def concrete(self, blamed: set[int] | None = None) -> None:
        if self.mismatch is not None:
            return
        analysis = self.analysis
        checked, full = analysis.checked, analysis.full
        try:
            outcome = run_concrete(full, analysis.full_placement.placements, random_inputs(full, 0), seed=0)
        except (EngineError, ValueError, KeyError, IndexError, TypeError):
            self.mismatch, self.runnable = True, False  # local shapes do not fit: its symptoms may still lead on
            return
        self.mismatch = outcome.mismatch is not None
        if self.mismatch and not self.symptoms:
            index = outcome.divergence_op
            if index is None:
                index = analysis.producer(outcome.mismatch[0])
            if index is not None and index < len(checked.ops):  # backward ops are not edited
                self.symptoms = [Symptom(DIVERGENCE, index, line=checked.ops[index].span.line)]


@dataclass
class Candidate:
    program: Program
    history: tuple[tuple[Edit, Program], ...]  # each edit with the program it was applied to
    screening: Screening
    report: Report | None = None
    payload: Any = None  # what a custom verifier keeps (the patched source of a source fix)

    @property
    def edits(self) -> tuple[Edit, ...]:
        return tuple(edit for edit, _ in self.history)

    @property
    def changes(self) -> list[Change]:
        return [edit.resolve(before) for edit, before in self.history]

    @property
    def description(self) -> str:
        return "; ".join(edit.describe(before) for edit, before in self.history)

    @property
    def rules(self) -> list[str]:
        return [edit.rule for edit in self.edits]

    @property
    def cost(self) -> float:
        return self.screening.cost


@dataclass
class IRFix:
    """A verified repair of an IR program."""

    program: Program
    changes: list[Change]
    description: str
    comm_cost: float
    report: Report
    edits: tuple[Edit, ...] = ()
    history: tuple[tuple[Edit, Program], ...] = ()
    sliced: bool = False  # a slice was verified before the whole program
    payload: Any = None


@dataclass
class SynthesisResult:
    fixes: list[IRFix] = field(default_factory=list)
    candidates: int = 0
    checks: int = 0
    seconds: float = 0.0
    first_fix_seconds: float | None = None
    notes: list[str] = field(default_factory=list)


def fingerprint(program: Program) -> str:
    return hashlib.sha1(print_program(program).encode()).hexdigest()


def _added_local(history: tuple[tuple[Edit, Program], ...]) -> frozenset[str]:
    names = set()
    for edit, before in history:
        if isinstance(edit, InsertCollectives):
            names |= {name for name, step in zip(edit.new_names(before), edit.steps) if step.local}
    return frozenset(names)


def screen(program: Program, env: dict[str, int] | None, model: CostModel,
           history: tuple[tuple[Edit, Program], ...] = (), blamed: set[int] | None = None,
           known_violation: bool = False) -> Screening | None:
    """The cheap pre-filter; None when the candidate is not even well-formed."""
    try:
        analysis = analyse(program, env, with_real_sizes=True)
    except NotAnalysable:
        return None
    return screen_analysis(analysis, model, history, blamed, known_violation)


def screen_analysis(analysis: Analysis, model: CostModel, history: tuple[tuple[Edit, Program], ...] = (),
                    blamed: set[int] | None = None, known_violation: bool = False) -> Screening:
    program = analysis.program
    symptoms = placement_symptoms(analysis) + async_symptoms(analysis.checked)
    cost = program_cost(program, analysis.real_shapes, analysis.placements, analysis.dtypes, model,
                        _added_local(history))
    screening = Screening(analysis, symptoms, cost, mismatch=True if known_violation else None)
    if not symptoms and not history and not known_violation:  # the root: find where values diverge
        screening.concrete()
    if not screening.symptoms and blamed:
        screening.symptoms = divergence_symptoms(analysis.checked, blamed)
    if blamed:
        screening.symptoms.sort(key=lambda s: s.line not in blamed)
    return screening


def _op_key(op) -> tuple:
    return op.results, op.kind, op.args, repr(sorted(op.attrs.items(), key=lambda kv: kv[0]))


def _edited_indices(original: Program, candidate: Program) -> list[int]:
    before = {_op_key(op) for op in original.ops}
    return [i for i, op in enumerate(candidate.ops) if _op_key(op) not in before]


class _Search:
    def __init__(self, program: Program, file: str | None, budget: Budget, model: CostModel,
                 rules: tuple[Rule, ...], progress: Progress, verifier: Verifier | None = None):
        self.program, self.file, self.budget, self.model, self.rules = program, file, budget, model, rules
        self.progress, self.verifier = progress, verifier
        self.result = SynthesisResult()
        self.started = time.perf_counter()
        self.seen: set[str] = {fingerprint(program)}

    def out_of_time(self) -> bool:
        return self.budget.seconds is not None and time.perf_counter() - self.started > self.budget.seconds

    def done(self) -> bool:
        fixes = len(self.result.fixes)
        return (self.budget.first_only and fixes > 0) or fixes >= self.budget.top_k or \
            self.result.checks >= self.budget.max_checks or self.out_of_time()

    def say(self, message: str) -> None:
        if self.progress:
            self.progress(message)

    def verify(self, candidate: Candidate) -> bool:
        """Sliced check first on large programs, then always the whole program."""
        if self.verifier is not None:
            report = self.verifier(candidate)
            if report is None:
                return False
            self.result.checks += 1
            candidate.report = report
            return self.accept(candidate, False)
        sliced = False
        if len(candidate.program.ops) >= SLICE_ABOVE_OPS:
            window = slice_around(candidate.screening.analysis,
                                  _edited_indices(self.program, candidate.program))
            if window is not None:
                sliced = True
                partial = check_program(window, self.file)
                if partial.verdict != "verified":
                    candidate.report = partial
                    return False
                self.say(f"  slice of {len(window.ops)} ops verified for: {candidate.description}")
        self.result.checks += 1
        candidate.report = check_program(candidate.program, self.file)
        return self.accept(candidate, sliced)

    def accept(self, candidate: Candidate, sliced: bool) -> bool:
        if candidate.report.verdict != "verified":
            return False
        self.result.fixes.append(IRFix(candidate.program, candidate.changes, candidate.description, candidate.cost,
                                       candidate.report, candidate.edits, candidate.history, sliced,
                                       candidate.payload))
        if self.result.first_fix_seconds is None:
            self.result.first_fix_seconds = time.perf_counter() - self.started
        self.say(f"  verified fix (comm cost {candidate.cost:.3g}): {candidate.description}")
        return True

    def expand(self, node: Candidate) -> list[Candidate]:
        children = []
        for rule, edit in candidate_edits(node.screening.symptoms, node.screening.analysis, self.rules):
            try:
                program = edit.apply(node.program)
            except (IndexError, KeyError, ValueError):
                continue
            key = fingerprint(program)
            if key in self.seen:
                continue
            self.seen.add(key)
            history = node.history + ((edit, node.program),)
            screening = screen(program, node.screening.analysis.env, self.model, history)
            self.result.candidates += 1
            if screening is not None:
                children.append(Candidate(program, history, screening))
        return children

    def run(self, root: Candidate) -> SynthesisResult:
        frontier = [root]
        for depth in range(1, self.budget.max_edits + 1):
            children = [child for node in frontier for child in self.expand(node)]
            self.say(f"repair round {depth}: {len(children)} candidate programs from {len(frontier)}")
            for child in sorted(children, key=lambda c: (c.cost, len(c.history))):
                if self.done():
                    break
                if child.screening.async_clean and child.screening.passes:
                    self.verify(child)
            if self.done():
                break
            remaining = [c for c in children if c.report is None or c.report.verdict != "verified"]
            for child in remaining:
                if child.report is not None:  # passed the screen, failed the real check
                    child.screening.mismatch = True
            if self.result.fixes:  # more edits pay only where they could still undercut the best fix
                best = min(fix.comm_cost for fix in self.result.fixes)
                remaining = [c for c in remaining if c.cost < best]
            frontier = sorted(remaining, key=lambda c: (c.screening.violations, c.cost, len(c.history)))
            frontier = frontier[:self.budget.beam]
            for node in frontier:
                node.screening.concrete()  # a divergence symptom needs the concrete run
            if not frontier:
                break
        self.result.fixes.sort(key=lambda fix: (fix.comm_cost, len(fix.changes)))
        self.result.seconds = time.perf_counter() - self.started
        return self.result


def synthesize(program: Program, report: Report | None = None, *, file: str | None = None,
               budget: Budget = Budget(), model: CostModel = CostModel(), rules: tuple[Rule, ...] = RULES,
               progress: Progress = None, verifier: Verifier | None = None) -> SynthesisResult:
    """Search for verified repairs of ``program``; fixes come back cheapest first.

    ``report`` (the program's own check) localises the search: symptoms on the lines its
    errors name are tried first, and a divergence no placement rule explains is looked for
    there.  ``verifier`` replaces the final check (``check_program`` on the candidate, after a
    sliced check on large programs); it must itself run a full check to return "verified".
    """
    blamed = {d.line for d in (report.diagnostics if report else []) if d.severity == ERROR and d.line}
    started = time.perf_counter()
    try:
        analysis = analyse(program, with_real_sizes=True)
    except NotAnalysable as problem:
        return SynthesisResult(notes=[f"cannot repair: {problem}"])
    violated = report is not None and report.verdict == "violations"
    root_screen = screen_analysis(analysis, model, (), blamed, known_violation=violated)
    if not root_screen.symptoms:
        return SynthesisResult(notes=["no communication symptom to repair (the violation is not one a collective "
                                      "edit can fix)"], seconds=time.perf_counter() - started)
    search = _Search(program, file or program.source, budget, model, rules, progress, verifier)
    search.started = started
    return search.run(Candidate(program, (), root_screen))
