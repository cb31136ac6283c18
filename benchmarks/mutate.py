"""Mutation campaign: does the tool tell mutated distributed code from correct code?

    python benchmarks/mutate.py [--files F ...] [--operators a,b] [--limit N] [--seed S]
                                [--jobs 2] [--json out.json]

Every mutation operator (benchmarks/mutants/operators.py) is applied at every site of every
gallery file (examples/models/), real-world driver (examples/realworld/) and driver around an
installed library (examples/realcode_drivers/: megatron-core, fairscale, yunchang, litgpt,
torchtitan); identical mutants are merged.  With ``--library``, the installed libraries' own
mapping and layer source is mutated too (benchmarks/mutants/library.py: a temporary copy of the
package first on the path, run through the drivers that call it; site-packages is never edited).  Each mutant is a copy in a temporary folder (originals are never
touched).  For each one:

* ground truth: real torch.distributed (gloo, CPU) runs, 1 rank against 2 and 4 ranks,
  outputs and gradients (of every floating input, except those a file's ``example_inputs()``
  writes ``requires_grad=False`` for, as the tool reads them), see benchmarks/mutants/groundtruth.py;
  results are cached by content hash;
* the tool: ``verify-agent translate MUTANT --format json`` (``--jobs`` at once), warm by default:
  through the repair campaign's worker (benchmarks/fix_worker.py, fork servers kept up per set of
  installed imports; every trace still sandboxed), ``--cold`` for one process per mutant.

For every mutant found (ground truth differs, tool says violations) of a file the tool reads, the
report counts whether the tool's first error names the mutated line (primary line) and whether
any error's repair line (``repair_line``) does: a driver mutant's line in the checked file itself
(the error names no other ``file``), a library mutant's line in the mutated library file (the
error's ``file`` ends with its path in the package), counted apart.  A collective statement removed (its
site holds ``pass``) is also judged at the statement before it in its block, and up to the statement that made
its operand: the repair inserts the call after any of those lines, to the same effect (issue 25's repair line for
a removed call; a patch's first changed line for an insertion).  A duplicated collective statement is judged at
both of its identical copies.
A mutant of a file with a bug of its own (expected.json's ``bug_lines`` / ``bug_line``, recorded by hand) holds two
bugs: a figure of its own also counts it named when the tool names that bug's line (moved by the edit as the diff
says), beside the strict figure.

Prints the confusion matrix ground truth {agree, differ} x tool {verified, violations,
unsupported, input-error, error}, the mutants left out (invalid: raises the same way on
1 and N ranks; race: numbers agreed but a wait() was removed), and every wrong definite
verdict: ``verified`` where the numbers differ, ``violations`` where they agree.
Exit status 1 when there is a wrong definite verdict, else 0.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import functools
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutants import groundtruth as gt  # noqa: E402
from mutants import tool  # noqa: E402
from mutants.library import LibraryMutant, installed_root, library_mutants, write_library_mutant  # noqa: E402
from mutants.operators import OPERATORS, Mutant, mutants_of, stratified_sample  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "examples" / "models"
REALWORLD = ROOT / "examples" / "realworld"
REALCODE = ROOT / "examples" / "realcode_drivers"
DEFAULT_CACHE = Path(__file__).resolve().parent / "mutants" / "cache"


@dataclass(frozen=True)
class Original:
    path: Path
    kind: str  # gt.GALLERY or gt.REALWORLD
    grad: bool
    expected: str | None  # expected verdict recorded next to the file, if any
    bug_lines: frozenset[int] = frozenset()  # a file with a bug of its own: the lines expected.json records for it

    @property
    def label(self) -> str:
        try:
            return str(self.path.relative_to(ROOT))
        except ValueError:
            return str(self.path)


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    truth: gt.Truth
    verdict: tool.ToolVerdict

    @property
    def wrong(self) -> bool:
        return (self.truth.status == gt.DIFFER and self.verdict.verdict == tool.VERIFIED) or \
            (self.truth.status == gt.AGREE and self.verdict.verdict == tool.VIOLATIONS)


def _expected(folder: Path) -> dict:
    path = folder / "expected.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def recorded_bug_lines(info) -> frozenset[int]:
    """The lines of a file's own bug as its expected.json entry records them (``bug_line``, ``bug_lines``), each
    checked by hand against the file; nothing for a file without a recorded bug."""
    if not isinstance(info, dict) or info.get("verdict") != "violations":
        return frozenset()
    lines = list(info.get("bug_lines", ()))
    if isinstance(info.get("bug_line"), int):
        lines.append(info["bug_line"])
    return frozenset(lines)


def originals(files: list[str] | None) -> list[Original]:
    paths = [Path(f).resolve() for f in files] if files else \
        sorted(GALLERY.glob("*.py")) + sorted(REALWORLD.glob("*.py")) + sorted(REALCODE.glob("*.py"))
    found = []
    for p in paths:
        if not p.is_file():
            raise SystemExit(f"mutate.py: {p}: no such file")
        info = _expected(p.parent).get(p.name, {})
        kind = gt.REALWORLD if p.parent.name in ("realworld", "realcode_drivers") else gt.GALLERY
        grad = True   # every floating input is trained unless example_inputs() writes requires_grad=False (as the tool)
        verdict = info.get("verdict") if isinstance(info, dict) else None
        found.append(Original(p, kind, grad, verdict, recorded_bug_lines(info)))
    return found


def write_mutant(folder: Path, original: Original | None, mutant: Mutant | LibraryMutant) -> tuple[Path, str | None]:
    """The mutant's file, and the import root of a mutated library copy (None for a driver mutant)."""
    if isinstance(mutant, LibraryMutant):
        driver, lib = write_library_mutant(folder, mutant)
        return driver, str(lib)
    target = folder / mutant.digest / original.path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(mutant.source)
    return target, None


def is_library(mutant) -> bool:
    return isinstance(mutant, LibraryMutant) or getattr(mutant, "library", False)


def is_realcode(mutant) -> bool:
    return is_library(mutant) or "realcode_drivers" in mutant.origin


@dataclass(frozen=True)
class Recorded:
    """A mutant's outcome from an earlier run's --json (``--resume``): not run again."""
    origin: str
    operator: str
    line: int
    description: str
    digest: str
    library: bool
    diff: str

    @property
    def file(self) -> str | None:
        """A library mutant's mutated file in its package (its origin is "<library file> via <driver>")."""
        return self.origin.split(" via ")[0] if self.library and " via " in self.origin else None


def _library_file(mutant) -> str | None:
    return mutant.file if isinstance(mutant, (LibraryMutant, Recorded)) else None


def recorded_outcomes(path: str) -> list[Outcome]:
    out = []
    for r in json.loads(Path(path).read_text())["mutants"]:
        mutant = Recorded(r["file"], r["operator"], r["line"], r["change"], r["digest"], r.get("library", False),
                          r.get("diff", ""))
        verdict = tool.ToolVerdict(r["tool"], r["tool_exit"], r["tool_seconds"], r["tool_detail"],
                                   tuple(r.get("tool_lines", ())), tuple(r.get("tool_repair_lines", ())),
                                   tuple(r.get("tool_files", ())))
        out.append(Outcome(mutant, gt.Truth(r["ground_truth"], r["ground_truth_reason"]), verdict))
    return out


def run_campaign(origs: list[Original], mutants: list[Mutant], *, jobs: int, gt_timeout: float, gt_parallel: int,
                 tool_timeout: float, worlds: tuple[int, ...], cache: gt.Cache, log=print,
                 max_seconds: float | None = None, warm: bool = True) -> list[Outcome]:
    by_label = {o.label: o for o in origs}
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        folder = Path(tmp)
        written = [write_mutant(folder, by_label.get(m.origin), m) for m in mutants]
        paths = [p for p, _ in written]
        libs = [lib for _, lib in written]
        requests = [gt.Request(str(p), gt.REALWORLD if lib else by_label[m.origin].kind,
                               True if lib else by_label[m.origin].grad, m.digest,
                               race_possible=m.operator == "remove_wait", lib_path=lib)
                    for p, lib, m in zip(paths, libs, mutants)]
        started = time.monotonic()
        stop_at = None if max_seconds is None else started + max_seconds
        verdicts: list[tool.ToolVerdict | None] = [None] * len(mutants)
        waiting = list(range(len(mutants)))
        running: dict[int, tool.PendingTool | tool.WarmRun] = {}
        # warm: one fix_worker per job, its fork servers kept between mutants (``tool.WarmTools``)
        workers = [tool.WarmTools() for _ in range(max(1, jobs))] if warm else []
        busy: dict[int, tool.WarmTools] = {}

        def pump_tools() -> None:
            """Keep ``jobs`` tool runs going (background processes, polled: no threads,
            because ground-truth ranks are forked from this process)."""
            for i, pending in list(running.items()):
                if pending.poll() is not None:
                    verdicts[i] = pending.result
                    del running[i]
                    if i in busy:
                        workers.append(busy.pop(i))
                    done = sum(v is not None for v in verdicts)
                    if done % 20 == 0 or done == len(mutants):
                        log(f"tool {done}/{len(mutants)} ({time.monotonic() - started:.0f}s)")
            if stop_at is not None and time.monotonic() > stop_at:
                waiting.clear()
            while waiting and len(running) < max(1, jobs):
                i = waiting.pop(0)
                if warm:
                    busy[i] = workers.pop(0)
                    running[i] = busy[i].submit(str(paths[i]), timeout=tool_timeout, lib_path=libs[i])
                else:
                    running[i] = tool.PendingTool(str(paths[i]), timeout=tool_timeout, lib_path=libs[i])

        truths = gt.ground_truth(requests, worlds=worlds, timeout=gt_timeout, cache=cache,
                                 parallel=gt_parallel, progress=log, tick=pump_tools, stop_at=stop_at)
        log(f"ground truth done in {time.monotonic() - started:.0f}s")
        try:
            while waiting or running:
                pump_tools()
                time.sleep(0.05)
        finally:
            for worker in [*workers, *busy.values()]:
                worker.close()
        log(f"tool runs done in {time.monotonic() - started:.0f}s")
    return [Outcome(m, t, v) for m, t, v in zip(mutants, truths, verdicts)
            if v is not None and t.reason != gt.NOT_RUN]


def confusion(outcomes: list[Outcome]) -> dict:
    matrix = {row: {col: 0 for col in tool.VERDICTS} for row in (gt.AGREE, gt.DIFFER)}
    left_out = {gt.INVALID: 0, gt.RACE: 0, gt.UNKNOWN: 0}
    for o in outcomes:
        if o.truth.status in matrix:
            matrix[o.truth.status][o.verdict.verdict] += 1
        else:
            left_out[o.truth.status] += 1
    return {"matrix": matrix, "left_out": left_out}


def _changed_lines(diff: str) -> set[int]:
    """The mutant file's lines a unified diff (``_diff``) adds or rewrites (its hunks' new side)."""
    lines = set()
    for match in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.M):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        lines.update(range(start, start + count))
    return lines


@functools.lru_cache(maxsize=None)
def _mutated_lines(mutant) -> frozenset[int]:
    """Where the mutation is in the mutant file (the file the tool reads): the operator's site (the first
    line of the mutated statement) and every line the edit wrote (an inserted statement sits one line below
    the site; a multi-line call's keyword is on a later line)."""
    diff = _diff_of(mutant)
    return frozenset({mutant.line} | _changed_lines(diff) | _reinsertion_lines(mutant, diff) | _copy_lines(mutant, diff)
                     | _swapped_lines(mutant, diff))


def _swapped_lines(mutant, diff: str) -> set[int]:
    """Two point-to-point calls swapped (``swap_send_recv``): the lines of both.  A unified diff shows the swap
    of two statements as one moved (deleted, and inserted on the other's side), so its new side names only
    the moved one's line, while the other statement's line now holds the moved one too: the mutant's lines
    from the insertion to the deletion all changed, and swapping either call back is the repair."""
    if mutant.operator != "swap_send_recv":
        return set()
    inserted = re.findall(r"^@@ -\S+,0 \+(\d+)(?:,(\d+))? @@", diff, re.M)
    deleted = re.findall(r"^@@ -\d+(?:,\d+)? \+(\d+),0 @@", diff, re.M)
    removed, added = re.findall(r"^-(.*)$", diff, re.M), re.findall(r"^\+(.*)$", diff, re.M)
    if len(inserted) != 1 or len(deleted) != 1 or len(re.findall(r"^@@", diff, re.M)) != 2 or removed != added:
        return set()
    start, count = int(inserted[0][0]), int(inserted[0][1] or 1)
    after = int(deleted[0])   # the deletion sits after this line of the mutant
    return set(range(min(start, after + 1), max(start + count, after + 1)))


def _copy_lines(mutant, diff: str) -> set[int]:
    """A collective statement duplicated: the lines of both copies.  The operator writes the copy below the
    site's statement, but the two are identical and a diff may show the insertion above it (the site's own
    line, the original then one copy further down); removing either copy is the repair."""
    hunks = re.findall(r"^@@ -\S+,0 \+(\d+)(?:,(\d+))? @@", diff, re.M)
    if mutant.operator != "duplicate_collective" or len(hunks) != 1 or len(re.findall(r"^@@", diff, re.M)) != 1:
        return set()
    start, count = int(hunks[0][0]), int(hunks[0][1] or 1)
    return set(range(start, start + 2 * count)) if start == mutant.line else set(range(mutant.line, start + count))


def _reinsertion_lines(mutant, diff: str) -> set[int]:
    """A collective statement removed (its site holds ``pass``): the lines of the statement before it in its
    block, after which a patch restoring the call inserts it, and up to the statement that made its operand
    (``_equivalent_places``).  Where the repair goes for a removed call is
    after the line that made what it should have reduced (issue 25, a finding's ``repair_line``); a patch's
    first changed line, for an insertion, is the line it inserts after.  Nothing when the removed statement
    opens its block, or the original file no longer holds the removed line there."""
    removed = re.findall(r"^-(.*)$", diff, re.M)
    added = re.findall(r"^\+(.*)$", diff, re.M)
    if mutant.operator != "drop_collective" or [a.strip() for a in added] != ["pass"] or not removed:
        return set()
    original = _original_source(mutant)
    if original is None or original.splitlines()[mutant.line - 1:mutant.line] != removed[:1]:
        return set()
    for node in ast.walk(ast.parse(original)):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for index, stmt in enumerate(block):
                if index and isinstance(stmt, ast.stmt) and stmt.lineno == mutant.line:
                    return _equivalent_places(block, index)
    return set()


def _equivalent_places(block: list, index: int) -> set[int]:
    """The lines after which the call removed from ``block[index]`` can go back to the same effect: the
    statement before it, and further up to the last statement that mentions a name the call takes (the one
    that made the value it reduces: after it, the call reads the same values; issue 25's repair line for a
    missing reduction is right after the op that produced the partial sum)."""
    call = block[index].value if isinstance(block[index], (ast.Expr, ast.Assign)) else None
    names = {n.id for arg in ([*call.args, *(k.value for k in call.keywords)] if isinstance(call, ast.Call) else [])
             for n in ast.walk(arg) if isinstance(n, ast.Name)}
    lines: set[int] = set()
    for at in range(index - 1, -1, -1):
        stmt = block[at]
        lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
        if not names or any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(stmt)):
            return lines
    return set(range(block[index - 1].lineno, (block[index - 1].end_lineno or block[index - 1].lineno) + 1))


def _moved_line(diff: str, line: int) -> int | None:
    """Where line ``line`` of the original is in the mutant (``_diff``'s hunks shift the lines below them);
    None when the mutation rewrote or removed that line (its site counts then)."""
    shift = 0
    for match in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@", diff, re.M):
        start, old = int(match.group(1)), int(match.group(2) or 1)
        new = int(match.group(3)) if match.group(3) is not None else 1
        if old and start <= line < start + old:
            return None
        if (old and start + old <= line) or (not old and start < line):
            shift += new - old
    return line + shift


def _diff_of(mutant) -> str:
    if isinstance(mutant, Recorded):
        return mutant.diff
    if isinstance(mutant, LibraryMutant):
        return _diff(mutant.original, mutant.source)
    return _diff((ROOT / mutant.origin).read_text(), mutant.source)


def own_bug_lines(mutant, known: dict[str, frozenset[int]]) -> frozenset[int]:
    """A mutant of a file with a bug of its own (``known``: file -> its recorded bug lines): where those lines
    are in the mutant.  Such a mutant holds two bugs, and a finding at the file's own bug names a real one."""
    lines = known.get(mutant.origin, frozenset()) if not is_library(mutant) else frozenset()
    if not lines:
        return frozenset()
    diff = _diff_of(mutant)
    return frozenset(moved for line in lines if (moved := _moved_line(diff, line)) is not None)


def _original_source(mutant) -> str | None:
    """The file a mutant was made from, as it is now: a gallery or driver file, or the installed library's."""
    if isinstance(mutant, LibraryMutant):
        return mutant.original
    if isinstance(mutant, Mutant):
        return (ROOT / mutant.origin).read_text()
    if mutant.library:
        root = installed_root(mutant.file.split("/")[0]) if mutant.file else None
        path = root / mutant.file if root is not None else None
    else:
        path = ROOT / mutant.origin
    return path.read_text() if path is not None and path.is_file() else None


def _names(mutant, line: int, file: str | None) -> bool:
    """An error's (line, file) is the mutated site (``_mutated_lines``): a driver mutant's line in the checked
    file itself (no other file named), a library mutant's line in a file ending with the mutated library path."""
    if line not in _mutated_lines(mutant):
        return False
    if _library_file(mutant):
        return bool(file) and ("/" + file.replace("\\", "/")).endswith("/" + _library_file(mutant))
    return not file


def _located(verdict) -> list[tuple[int, str | None]]:
    files = verdict.files if len(verdict.files) == len(verdict.lines) else (None,) * len(verdict.lines)
    return list(zip(verdict.lines, files))


def line_hits(outcomes: list[Outcome], library: bool = False) -> dict:
    """Found bugs (differ + violations) of driver/gallery mutants (``library``: of library mutants, whose
    mutated line is in the library file, so the error must name that file too): how many name the
    mutated line as the primary (first error) line, and how many as a repair line (the checked file's)."""
    found = [o for o in outcomes if o.truth.status == gt.DIFFER and o.verdict.verdict == tool.VIOLATIONS
             and is_library(o.mutant) == library and (not library or bool(_library_file(o.mutant)))]
    primary = sum(1 for o in found if _located(o.verdict) and _names(o.mutant, *_located(o.verdict)[0]))
    anywhere = sum(1 for o in found if any(_names(o.mutant, *at) for at in _located(o.verdict)))
    repaired = lambda o: any(line in _mutated_lines(o.mutant) for line in o.verdict.repair_lines)  # noqa: E731
    repair = 0 if library else sum(1 for o in found if repaired(o))
    either = sum(1 for o in found if (_located(o.verdict) and _names(o.mutant, *_located(o.verdict)[0]))
                 or (not library and repaired(o)))
    return {"found": len(found), "primary": primary, "any_error_line": anywhere, "repair": repair, "either": either}


def _hits_text(h: dict) -> str:
    if not h["found"]:
        return "found bugs naming the mutated line: none found"
    pct = lambda n: f"{n} ({100 * n / h['found']:.0f}%)"  # noqa: E731
    return (f"found bugs naming the mutated line ({h['found']} found, library mutants apart): primary line {pct(h['primary'])}, "
            f"repair line {pct(h['repair'])}, either {pct(h['either'])}, any error line {pct(h['any_error_line'])}")


def of_correct_files(outcomes: list[Outcome], buggy: frozenset[str]) -> list[Outcome]:
    """Mutants of files that are right before the mutation (their expected.json verdict is not
    'violations'): a found bug of a buggy file's mutant may be the file's own bug, at its own line."""
    return [o for o in outcomes if o.mutant.origin not in buggy]


def render(outcomes: list[Outcome], summary: dict, buggy: frozenset[str] = frozenset(),
           known: dict[str, frozenset[int]] | None = None) -> str:
    text = _render_matrix(outcomes, summary)
    real = [o for o in outcomes if is_realcode(o.mutant)]
    if real and len(real) < len(outcomes):
        text += "\n\nof which around installed libraries (examples/realcode_drivers/ and library source mutants):\n"
        text += _render_matrix(real, confusion(real), wrong_list=False)
    text += "\n" + _hits_text(line_hits(outcomes))
    if buggy:
        text += "\nof files right before the mutation: " + _hits_text(line_hits(of_correct_files(outcomes, buggy)))
    if real:
        text += "\nrealcode drivers only: " + _hits_text(line_hits(real))
    if any(_library_file(o.mutant) for o in outcomes):
        text += "\nlibrary mutants (the error must name the library file and line): " + \
            _hits_text(line_hits(outcomes, library=True)).replace(", library mutants apart", "")
        named, found = all_hits(outcomes)
        text += f"\nall found bugs, library mutants included (the strict figure): {named} of {found} name the mutated line"
        if buggy:
            named, found = all_hits(of_correct_files(outcomes, buggy))
            text += (f"\nof mutants of right files, drivers and library source (no file with a bug of its own): {named} "
                     f"of {found}")
    if known:
        named, found = own_bug_hits(outcomes, known)
        text += (f"\nall found bugs, a mutant of a file with a bug of its own also named at that bug's recorded line "
                 f"(expected.json): {named} of {found}")
    return text


def all_hits(outcomes: list[Outcome]) -> tuple[int, int]:
    """(named, found): found bugs naming the mutated line (the first error's line or a repair line, as
    ``line_hits``'s "either"), driver, gallery and real-world mutants and library mutants together."""
    plain, library = line_hits(outcomes), line_hits(outcomes, library=True)
    return plain["either"] + library["either"], plain["found"] + library["found"]


def own_bug_hits(outcomes: list[Outcome], known: dict[str, frozenset[int]]) -> tuple[int, int]:
    """(named, found) over all found bugs (``all_hits``), where a mutant of a file with a bug of its own is also
    named when its first error's line or a repair line is that bug's recorded line (``own_bug_lines``): such a
    mutant holds two bugs, and the tool naming the file's own one names a real bug at its line."""
    named, found = all_hits(outcomes)
    for o in outcomes:
        if o.truth.status != gt.DIFFER or o.verdict.verdict != tool.VIOLATIONS or is_library(o.mutant):
            continue
        own = own_bug_lines(o.mutant, known)
        if not own or _either(o):
            continue
        first = _located(o.verdict)[:1]
        if any(line in own and not file for line, file in first) or any(line in own for line in o.verdict.repair_lines):
            named += 1
    return named, found


def _either(o: Outcome) -> bool:
    """``line_hits``'s "either" for one found bug of a driver, gallery or real-world mutant."""
    first = _located(o.verdict)[:1]
    return bool(first and _names(o.mutant, *first[0])) or \
        any(line in _mutated_lines(o.mutant) for line in o.verdict.repair_lines)


def _render_matrix(outcomes: list[Outcome], summary: dict, wrong_list: bool = True) -> str:
    m = summary["matrix"]
    width = max(len(v) for v in tool.VERDICTS) + 2
    lines = ["ground truth \\ tool".ljust(20) + "".join(v.rjust(width) for v in tool.VERDICTS) + "total".rjust(8)]
    for row in (gt.AGREE, gt.DIFFER):
        lines.append(row.ljust(20) + "".join(str(m[row][v]).rjust(width) for v in tool.VERDICTS)
                     + str(sum(m[row].values())).rjust(8))
    counted = sum(sum(r.values()) for r in m.values())
    unsupported = sum(m[r][tool.UNSUPPORTED] for r in m)
    wrong = [o for o in outcomes if o.wrong]
    lines.append(f"mutants counted: {counted}; left out: " +
                 ", ".join(f"{k} {v}" for k, v in summary["left_out"].items()))
    if counted:
        lines.append(f"wrong definite verdicts: {len(wrong)} (verified where numbers differ: {m[gt.DIFFER][tool.VERIFIED]}, "
                     f"violations where they agree: {m[gt.AGREE][tool.VIOLATIONS]}); "
                     f"unsupported: {100 * unsupported / counted:.1f}%")
    undecided = [o for o in outcomes if o.truth.status in m and o.verdict.verdict in (tool.UNSUPPORTED, tool.ERROR)]
    if undecided and wrong_list:
        lines.append("")
        lines.append("unsupported and errors (file:line operator -- ground truth -- the tool's first error or note):")
        for o in sorted(undecided, key=lambda o: (o.mutant.origin, o.mutant.line, o.mutant.operator)):
            lines.append(f"  {o.mutant.origin}:{o.mutant.line} {o.mutant.operator} -- {o.truth.status} -- "
                         f"{o.verdict.verdict}: {o.verdict.detail[:160]}")
    if wrong and wrong_list:
        lines.append("")
        lines.append("wrong definite verdicts (file:line operator -- change -- tool verdict / ground truth):")
        for o in sorted(wrong, key=lambda o: (o.mutant.origin, o.mutant.line, o.mutant.operator)):
            lines.append(f"  {o.mutant.origin}:{o.mutant.line} {o.mutant.operator} -- {o.mutant.description} -- "
                         f"tool {o.verdict.verdict} / {o.truth.status}: {o.truth.reason}")
    return "\n".join(lines)


def _diff(original: str, mutated: str) -> str:
    return "".join(line for line in difflib.unified_diff(original.splitlines(True), mutated.splitlines(True), n=0)
                   if not line.startswith(("+++", "---")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", nargs="+", help="files to mutate (default: the gallery and the real-world drivers)")
    ap.add_argument("--operators", help="comma-separated operator names (default: all): " + ", ".join(OPERATORS))
    ap.add_argument("--limit", type=int, help="at most N mutants, a seeded sample mixing operators and files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="tool runs at once")
    ap.add_argument("--json", help="write every mutant's outcome and the matrix to this file")
    ap.add_argument("--worlds", default="2,4", help="rank counts compared with 1 rank (default 2,4)")
    ap.add_argument("--gt-timeout", type=float, default=8.0, help="seconds without progress before a run counts as hung")
    ap.add_argument("--gt-parallel", type=int, default=6,
                    help="ground-truth runs at once (hung runs only wait, so more than the cores)")
    ap.add_argument("--tool-timeout", type=float, default=60.0)
    ap.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="ground-truth cache ('' for none)")
    ap.add_argument("--max-seconds", type=float,
                    help="start no new mutant after this long; the matrix covers the mutants finished")
    ap.add_argument("--cold", action="store_true",
                    help="one verify-agent process per mutant (default: warm, through benchmarks/fix_worker.py)")
    ap.add_argument("--list", action="store_true", help="only list the mutants")
    ap.add_argument("--library", action="store_true",
                    help="also mutate the installed libraries' own source (benchmarks/mutants/library.py)")
    ap.add_argument("--resume", help="an earlier run's --json: its mutants are not run again, their outcomes count")
    ap.add_argument("--realcode-limit", type=int,
                    help="with --limit: at least this many of the sample around installed libraries")
    args = ap.parse_args(argv)

    operators = [o.strip() for o in args.operators.split(",")] if args.operators else None
    unknown = [o for o in operators or [] if o not in OPERATORS]
    if unknown:
        print(f"mutate.py: unknown operator(s) {', '.join(unknown)}; known: {', '.join(OPERATORS)}", file=sys.stderr)
        return 2
    origs = originals(args.files)
    mutants: list[Mutant] = []
    seen = set()
    for o in origs:
        for m in mutants_of(o.label, o.path.read_text(), operators):
            if m.digest not in seen:
                seen.add(m.digest)
                mutants.append(m)
    if args.library:
        for m in library_mutants(operators):
            if m.digest not in seen:
                seen.add(m.digest)
                mutants.append(m)
    total = len(mutants)
    if args.limit is not None:
        if args.realcode_limit:
            real = [m for m in mutants if is_realcode(m)]
            other = [m for m in mutants if not is_realcode(m)]
            take_real = min(len(real), max(args.realcode_limit, args.limit - len(other)))
            mutants = stratified_sample(real, take_real, args.seed) + \
                stratified_sample(other, max(0, args.limit - take_real), args.seed)
        else:
            mutants = stratified_sample(mutants, args.limit, args.seed)
    earlier = recorded_outcomes(args.resume) if args.resume else []
    done = {o.mutant.digest for o in earlier}
    mutants = [m for m in mutants if m.digest not in done]
    print(f"{len(origs)} files, {total} distinct mutants, running {len(mutants)}"
          + (f" ({len(earlier)} outcomes taken from {args.resume})" if earlier else ""), flush=True)
    if args.list:
        for m in mutants:
            print(f"{m.origin}:{m.line} {m.operator} -- {m.description}")
        return 0

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    cache = gt.Cache(Path(args.cache_dir) if args.cache_dir else None)
    worlds = tuple(int(w) for w in args.worlds.split(","))
    started = time.monotonic()
    outcomes = run_campaign(origs, mutants, jobs=args.jobs, gt_timeout=args.gt_timeout, gt_parallel=args.gt_parallel,
                            tool_timeout=args.tool_timeout, worlds=worlds, cache=cache, log=log,
                            max_seconds=args.max_seconds, warm=not args.cold)
    ran = len(outcomes)
    outcomes = earlier + outcomes
    summary = confusion(outcomes)
    if ran < len(mutants):
        print(f"time limit: {ran} of {len(mutants)} mutants finished (both ground truth and tool)")
    buggy = frozenset(o.label for o in origs if o.expected == "violations")
    known = {o.label: o.bug_lines for o in origs if o.bug_lines}
    print(render(outcomes, summary, buggy, known))
    print(f"({time.monotonic() - started:.0f}s)")
    if args.json:
        sources = {o.label: o.path.read_text() for o in origs}
        for o in outcomes:
            if isinstance(o.mutant, LibraryMutant):
                sources[o.mutant.origin] = o.mutant.original

        def diff(m) -> str:
            return m.diff if isinstance(m, Recorded) else _diff(sources[m.origin], m.source)

        records = [{
            "file": o.mutant.origin, "operator": o.mutant.operator, "line": o.mutant.line,
            "change": o.mutant.description, "digest": o.mutant.digest,
            "ground_truth": o.truth.status, "ground_truth_reason": o.truth.reason,
            "tool": o.verdict.verdict, "tool_exit": o.verdict.exit_code, "tool_detail": o.verdict.detail,
            "tool_seconds": round(o.verdict.seconds, 2), "wrong": o.wrong, "realcode": is_realcode(o.mutant),
            "tool_lines": list(o.verdict.lines), "tool_repair_lines": list(o.verdict.repair_lines),
            "tool_files": list(o.verdict.files),
            "diff": diff(o.mutant), "library": is_library(o.mutant),
        } for o in outcomes]
        Path(args.json).write_text(json.dumps({**summary, "line_hits": line_hits(outcomes),
                                               "line_hits_right_files": line_hits(of_correct_files(outcomes, buggy)),
                                               "library_line_hits": line_hits(outcomes, library=True),
                                               "all_line_hits": all_hits(outcomes),
                                               "all_line_hits_right_files": all_hits(of_correct_files(outcomes, buggy)),
                                               "all_line_hits_own_bug_lines": own_bug_hits(outcomes, known),
                                               "mutants": records}, indent=1))
    return 1 if any(o.wrong for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
