"""Verified fixes for what a traced run found: candidate edits at the recorded lines, each run again.

``translate`` runs the file and names where its values first go wrong (the line and the recorded
op).  ``frontends.patches.at_line`` turns that into candidate source edits in the file's idioms;
here each candidate is written to a temporary copy and goes through exactly what ``translate``
does (``verify_agent.traced.trace_and_verify``: one device, 2 simulated ranks with the proof, 4
simulated ranks screened).  A candidate that verifies is then run for real on gloo ranks
(``frontends.traced.confirm``: the patched code on one device and on the ranks, same inputs); a
fix torch refutes is never shown.  Fixes are ranked by the alpha-beta cost of the collectives
the patched run issued.  The user's file is never touched here (``fix --write`` writes through
``safe_write``).
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from verifier.report import Report

from .fixes import SourceFix
from .headway import Base, base_of, ranked, sites_of

Progress = Optional[Callable[[str], None]]
CANDIDATE_TIMEOUT = 90.0     # seconds for one candidate's trace and proof
CONFIRM_TIMEOUT = 90.0


@dataclass(frozen=True)
class TracedSettings:
    """How the file was traced (the same for every candidate)."""

    entry: Optional[str] = None
    mesh: Optional[str] = None
    inputs: dict | None = None
    layouts: tuple[str, ...] = ()
    confirm: bool = True              # run a verified candidate on real gloo ranks before showing it
    budget_seconds: float = 600.0     # all candidates together
    harness: Optional[str] = None     # the harness file that built the entry (--harness, or the LLM's)


MAX_LINKED_ENTRIES = 500   # entries of a directory mirrored by links in a candidate's overlay


def _mirror(source: Path, target: Path, file: Path, patched: str) -> None:
    """``target`` made to look like ``source``: every entry a link to the original, except the
    directory on the way to ``file`` (mirrored the same way) and ``file`` itself (the candidate)."""
    target.mkdir(parents=True, exist_ok=True)
    entries = sorted(source.iterdir())
    if len(entries) > MAX_LINKED_ENTRIES:   # a huge directory: only the way to the file
        entries = [e for e in entries if e == file or file.is_relative_to(e)]
    for entry in entries:
        if entry == file:
            (target / entry.name).write_text(patched, encoding="utf-8")
        elif entry.is_dir() and not entry.is_symlink() and file.is_relative_to(entry):
            _mirror(entry, target / entry.name, file, patched)
        elif entry.name != "__pycache__":
            (target / entry.name).symlink_to(entry)


def write_candidate(patched: str, path: str) -> Path:
    """A temporary copy of ``path`` holding ``patched``, placed so that it imports as the original does.

    A script is copied alone.  A file inside a package is traced as its module (``locate``: the import
    root and the dotted name), so the copy sits in an overlay of that package: the same directories
    from the import root down, every other file a link to the original, so ``from . import x`` and the
    package's own helpers resolve as they do for the file itself.  The caller removes
    ``overlay_root(copy)`` (links are removed, never followed)."""
    from frontends.traced.location import locate

    folder = Path(tempfile.mkdtemp(prefix="verify-agent-fix-"))
    original = Path(path).resolve()
    try:
        place = locate(original)
    except (OSError, ValueError):
        place = None
    if place is None or place.module is None or place.installed or not original.is_file():
        copy = folder / original.name
        copy.write_text(patched, encoding="utf-8")
        return copy
    root = Path(place.root).resolve()
    _mirror(root, folder / "overlay", original, patched)
    return folder / "overlay" / original.relative_to(root)


def overlay_root(copy: Path) -> Path:
    """The temporary folder ``write_candidate`` made for ``copy``."""
    for parent in copy.parents:
        if parent.name.startswith("verify-agent-fix-"):
            return parent
    return copy.parent


@dataclass
class Checked:
    report: Optional[Report]
    program: object = None
    options: object = None
    scaled_program: object = None   # the 4-rank recording, when there was one


def check_candidate(patched: str, path: str, settings: TracedSettings, timeout: float) -> tuple[Checked, Path]:
    """Trace and verify ``patched`` as a copy of ``path`` in a temporary folder; (result, copy).

    The caller removes the copy's folder.  Findings are not re-run on gloo (only a candidate that
    verifies matters)."""
    from ..traced import trace_and_verify

    copy = write_candidate(patched, path)
    traced = trace_and_verify(patched, str(copy), entry=settings.entry, mesh=settings.mesh,
                              inputs=dict(settings.inputs or {}), layouts=list(settings.layouts), timeout=timeout,
                              confirm_findings=False, harness=settings.harness)
    if traced is None or traced.report is None:
        return Checked(None), copy
    return Checked(traced.report, traced.program, traced.options, traced.scaled_program), copy


def confirm_fix(checked: Checked, copy: Path, path: str, timeout: float = CONFIRM_TIMEOUT) -> tuple[str, str]:
    """("agrees" | "reproduced" | "not-run", sentence): the patched file on one device and on gloo
    ranks with seeded inputs, every compared output and gradient (the entry's inputs' among them),
    on the proof's ranks and then on the 4-rank run's.  It agrees only when every world run agrees."""
    outcome, detail = _confirm_at(checked.program, checked, copy, path, timeout)
    scaled = checked.scaled_program
    if outcome != "agrees" or scaled is None or getattr(scaled, "world", None) == checked.program.world:
        return outcome, detail
    more, more_detail = _confirm_at(scaled, checked, copy, path, timeout)
    if more == "agrees":
        return more, f"{detail}; {more_detail}"
    return more, more_detail


def confirmed_worlds(checked: Checked) -> str:
    """"2 and 4": the numbers of ranks ``confirm_fix`` ran the patched file on."""
    worlds = [checked.program.world]
    scaled = checked.scaled_program
    if scaled is not None and getattr(scaled, "world", None) not in worlds and getattr(scaled, "comparisons", ()):
        worlds.append(scaled.world)
    return " and ".join(str(w) for w in worlds)


def _confirm_at(program, checked: Checked, copy: Path, path: str, timeout: float) -> tuple[str, str]:
    try:
        import numpy as np

        from frontends.traced.confirm import confirm_on_ranks
        from verifier.confirmation import NOT_RUN, Finding
        from verifier.equivalence import random_values
    except ImportError as missing:   # the real-rank runner is not part of this installation
        return "not-run", f"no real-rank runner ({missing})"
    if program is None or not getattr(program, "comparisons", ()):
        return NOT_RUN, "nothing to compare"

    def kind_of(spec) -> str:
        dtype = str(spec.dtype).replace("torch.", "")
        return "bool" if dtype == "bool" else "int" if dtype.startswith(("i", "u", "long")) else "float"

    leaves = {**random_values(program.inputs, 1, kind_of), **program.pinned}
    finding = Finding(program.comparisons[0].label, 0, (), {k: np.asarray(v) for k, v in leaves.items()},
                      how="a fix's check on real ranks")
    options = checked.options
    try:
        confirmation = confirm_on_ranks(program, finding, path=str(copy), shown_as=path,
                                        entry=getattr(options, "entry", None),
                                        shapes=getattr(options, "shapes", None), timeout=timeout,
                                        harness=getattr(options, "harness", None), every_value=True)
    except Exception as error:  # noqa: BLE001 - the runner is another module's; its failure is no evidence
        return NOT_RUN, f"the real-rank run failed ({type(error).__name__}: {error})"
    return confirmation.outcome, confirmation.detail


def traced_fixes(source: str, path: str, report: Report, settings: TracedSettings = TracedSettings(),
                 progress: Progress = None, *, top_k: int = 3) -> list[SourceFix]:
    """Verified (and, where the real-rank runner works, confirmed) fixes of a traced report, cheapest
    first.  Candidates are checked best prior first until ``top_k`` verify or the budget is spent.

    No single edit verifies when the file has two bugs: an edit that made headway (``headway``) is
    then the base of a second search, from its patched program and its report's sites; what is shown
    is the program after both edits, verified and confirmed as a single edit's is.  The order spends
    the budget where the run points first: the edits at the lines it names, then second edits at the
    lines named after the best of those, then the file's other communicating lines, then the rest of
    the second edits' candidates."""
    repair = _Repair(source, path, settings, progress, top_k)
    with warm_for(path, source, cpu_seconds=settings.budget_seconds + 120.0):
        head, rest = _split(pool_for(source, path, report))
        bases = repair.check(source, report, head, "")
        if not repair.found:   # a second edit before the rest of the single ones only when none verified yet
            repair.chain([base for base in ranked(bases) if base.named][:EARLY_BASES], named_only=True)
        bases += repair.check(source, report, rest, "")
        repair.chain(ranked(bases)[:MAX_BASES], named_only=False)
    found = repair.found
    found.sort(key=lambda fix: (not _confirmed(fix), fix.comm_cost))   # a fix real ranks confirmed first
    return found[:top_k]


EARLY_BASES = 2   # bases whose second edits at the named lines come before the file's guessed lines
MAX_BASES = 3     # bases a second edit is searched on at all (each costs a pool of candidates)
MAX_EDITS = 3     # edits chained at most


def _split(pool: list) -> tuple[list, list]:
    """The pool up to its last edit at a named line (in the pool's order: a guessed line's edit that
    answers its op stays among them), and the rest."""
    last = max((index for index, candidate in enumerate(pool) if not candidate.guessed), default=-1)
    return pool[:last + 1], pool[last + 1:]


def _confirmed(fix: SourceFix) -> bool:
    return fix.report is not None and str(fix.report.extra.get("fix_confirmation", "")).startswith("confirmed")


def pool_for(source: str, path: str, report: Report) -> list:
    """The candidate edits for ``report``'s findings: at the sites it names, then at the file's
    communicating lines, best prior first."""
    from frontends.patches.at_line import SCALE_OPS, candidates, communicating_lines

    sites = sites_of(report)
    if not sites:
        return []
    named = {site.line for site in sites}
    scaling = any(site.op in SCALE_OPS for site in sites)
    sites += [site for site in communicating_lines(source, path, scaling) if site.line not in named]
    return candidates(source, path, sites)


def warm_for(path: str, source: str, cpu_seconds: float = 3600.0):
    """The fork server ``translate DIR`` uses (``frontends/fork_server.py``), for the runs of one file's
    repair: torch and the file's installed imports are loaded once, each trace and confirmation is a
    sandboxed grandchild forked from it.  Inside an active server (``translate DIR``): that one."""
    from frontends.fork_server import installed_imports, warm_runs
    from frontends.traced.location import locate

    try:
        roots = [Path(locate(str(path)).root)]
    except (OSError, ValueError):
        roots = [Path(path).resolve().parent]
    return warm_runs(cpu_seconds=cpu_seconds, libraries=installed_imports([(Path(path), source)], roots))


class _Repair:
    """One file's candidate checks: the fixes found, the texts already checked, the budget's clock."""

    def __init__(self, source: str, path: str, settings: TracedSettings, progress: Progress, top_k: int):
        self.source, self.path, self.settings, self.progress, self.top_k = source, path, settings, progress, top_k
        self.started = time.perf_counter()
        self.found: list[SourceFix] = []
        self.tried = {source}   # patched texts already checked (an edit undone by the next is not checked again)

    def left(self) -> float:
        return self.settings.budget_seconds - (time.perf_counter() - self.started)

    def done(self) -> bool:
        return len(self.found) >= self.top_k or self.left() <= 5.0

    def say(self, text: str) -> None:
        if self.progress:
            self.progress(text)

    def chain(self, bases: list[Base], named_only: bool, edits: int = 2) -> None:
        """One more edit on top of each base, on its patched program: at its report's named lines (and,
        unless ``named_only``, at the file's other communicating lines).  Up to ``MAX_EDITS`` in all: the
        strongest base among those edits (one that fixed part of what was left, or uncovered what it
        hid) is built on in turn, depth first."""
        for base in bases:
            if self.done():
                return
            self.say(f"repair: building on `{base.description}` ({base.why})")
            pool = pool_for(base.patched, self.path, base.report)
            more = self.check(base.patched, base.report, _split(pool)[0] if named_only else pool,
                              base.description + "; ")
            if edits < MAX_EDITS:
                self.chain([b for b in ranked(more) if b.strength <= 1][:1], named_only, edits + 1)

    def check(self, source: str, report: Report, pool: list, prefix: str) -> list[Base]:
        """Check ``pool`` (candidate edits of ``source``, whose check is ``report``); verified ones go to
        ``found``.  Returns the candidates that made headway."""
        from frontends.patches.editor import unified_diff
        from verifier.synthesis.cost import traced_cost

        settings = self.settings
        if self.done():
            return []
        if pool:
            named = sorted({site.line for site in sites_of(report)})
            self.say(f"repair: {len(pool)} candidate edit(s) at line(s) {', '.join(map(str, named))}"
                     + ("" if all(not c.guessed for c in pool) else " (and the file's communicating lines)"))
        bases: list[Base] = []
        for candidate in pool:
            if self.done():
                break
            if candidate.patched in self.tried:
                continue
            self.tried.add(candidate.patched)
            checked, copy = check_candidate(candidate.patched, self.path, settings, min(CANDIDATE_TIMEOUT, self.left()))
            try:
                verdict = checked.report.verdict if checked.report is not None else "does not run"
                if verdict != "verified":
                    self.say(f"  candidate does not verify ({verdict}): {prefix}{candidate.description}")
                    if checked.report is not None:
                        base = base_of(candidate, report, checked.report, source, prefix)
                        if base is not None:
                            bases.append(base)
                    continue
                confirmed = "not run on real ranks (--no-confirm)"
                if settings.confirm:
                    outcome, detail = confirm_fix(checked, copy, self.path)
                    if outcome == "reproduced":   # torch refutes the proof: never shown, and a defect of ours
                        self.say(f"  candidate verified but real ranks disagree ({detail}): {prefix}"
                                 f"{candidate.description}")
                        continue
                    confirmed = (f"confirmed on {confirmed_worlds(checked)} gloo ranks" if outcome == "agrees"
                                 else f"not confirmed on real ranks: {detail}")
                checked.report.file = self.path
                checked.report.extra["fix_confirmation"] = confirmed
                cost = traced_cost(checked.program) if checked.program is not None else 0.0
                self.found.append(SourceFix(f"{prefix}{candidate.description} ({confirmed})", candidate.patched,
                                            unified_diff(self.source, candidate.patched, self.path), cost,
                                            checked.report, seconds=time.perf_counter() - self.started))
                self.say(f"  patched file verifies ({confirmed}): {prefix}{candidate.description}")
            finally:
                shutil.rmtree(overlay_root(copy), ignore_errors=True)
        return bases
