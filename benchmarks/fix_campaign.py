"""The repair campaign: real bugs, ``verify-agent fix --write``, and real gloo ranks as the judge.

    python benchmarks/bench_fix.py --campaign [--mutants 60] [--library-mutants 60] [--seed 0] [--operators a,b]
                                              [--timeout 240] [--jobs 2] [--only TEXT ...] [--json out.json]
                                              [--max-seconds T] [--rerun PREVIOUS.json] [--resume EARLIER.json]

The bugs: the buggy files of ``examples/realworld/`` (``expected.json``) and a seeded sample of
the mutation campaign's communication mutants (``benchmarks/mutants``: a dropped, duplicated or
re-opped collective, a changed ``dim=``, a ``/ world`` dropped or added) of ``examples/models``,
``examples/realworld`` and every ``examples/realcode*`` folder of drivers around real libraries.
A mutant counts only if real gloo ranks (1 vs 2 and 4, outputs and gradients; cached) show it
wrong; inputs a file's ``example_inputs()`` writes ``requires_grad=False`` for are not trained (the
runner reads that statement as the tool does), so a forward-only file is judged on what it claims.
For each bug, on a temporary copy:

1. ``verify-agent fix COPY --write --top 1 --no-backup --timeout T`` (the CLI as a user runs it);
   the seconds until its first "patched file verifies" line are the time to the first verified fix;
2. the written file must verify (``fix --write`` checks it again: exit 0), and
3. match one rank on real gloo ranks (2 and 4, outputs and gradients) — the same runners as the
   mutation campaign's ground truth.

Prints one row per bug, then the share repaired (1 and 2 and 3), the number of fixes shown that
real ranks refute (the written file differs from one rank), and the same split by where the bug
lives (a driver around a real library, or the project's own plain torch.distributed code).

``--rerun EARLIER.json`` runs the bugs that file did not repair and those it did not reach (its time
limit), with any code, and prints the figures combined over both runs.

``--json`` is rewritten after every bug, with a digest of the code that ran (the tool's packages and
the campaign's own files, as they are in the working tree).  ``--resume EARLIER.json`` takes the fix
runs of the bugs that file holds *when its digest is today's* (the same code) instead of running them
again, and runs the rest: a campaign cut short (``--max-seconds``, a killed run) is finished in a
second run and reported as one.  Rows of other code are run again.  The ground truth of every
written file is looked up again (cached: it costs nothing when the file was judged before).
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from fix_worker import END as END_MARK  # noqa: E402  (the worker's line after each run)
from mutants import groundtruth as gt  # noqa: E402
from mutants.operators import mutants_of, stratified_sample  # noqa: E402

COMMUNICATION = ("drop_collective", "duplicate_collective", "reduce_op", "dim", "drop_world_scaling",
                 "add_world_scaling")
# a file that imports one of these runs a real library's parallel layers (not the project's own code)
LIBRARIES = re.compile(r"^\s*(?:from|import)\s+(megatron|fairscale|deepspeed|torchtitan|litgpt|transformers|yunchang"
                       r"|torch\.distributed\.(?:tensor|fsdp|_composable)|torch\.nn\.parallel)\b", re.M)
FIRST_FIX = "patched file verifies"
NOT_STARTED = "not started (--max-seconds)"
RESUMED = "fix run taken from --resume (same code)"
# what the campaign's outcome depends on: the tool's packages, the ground-truth runners, these files
CODE = ("frontends", "verifier", "verify_agent", "benchmarks/mutants", "tests/groundtruth",
        "benchmarks/fix_campaign.py", "benchmarks/fix_worker.py")


def code_digest() -> str:
    """A digest of the tracked Python files of ``CODE`` as they are in the working tree now."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", *CODE], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split("\0")
        paths = sorted(ROOT / name for name in listed if name.endswith(".py"))
    except (OSError, subprocess.CalledProcessError):   # not a git checkout: every Python file there
        paths = sorted(p for name in CODE for p in ([ROOT / name] if name.endswith(".py") else
                                                    (ROOT / name).rglob("*.py")))
    digest = hashlib.sha256()
    for path in paths:
        if path.is_file():
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass
class Bug:
    label: str            # file (and mutant) as shown
    origin: Path          # the original file the bug lives in
    source: str           # the buggy text
    kind: str             # ground-truth runner: gt.GALLERY or gt.REALWORLD
    library: bool         # a driver around a real library
    grad: bool = True     # gradients compared too (inputs the file writes requires_grad=False for stay untrained)
    truth: str = ""       # the buggy file on real ranks
    seconds: float | None = None     # to the first verified fix
    total: float = 0.0               # the whole fix --write run
    exit_code: int | None = None
    patched: str | None = None
    description: str = ""
    patched_truth: str = ""
    notes: list[str] = field(default_factory=list)
    progress: list[str] = field(default_factory=list)   # the fix run's progress lines (stderr)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def fixed(self) -> bool:
        return self.patched is not None and self.exit_code == 0 and self.patched_truth == gt.AGREE

    @property
    def refuted(self) -> bool:
        return self.patched is not None and self.patched_truth == gt.DIFFER


def _kind(path: Path) -> str:
    return gt.GALLERY if path.parent.name == "models" else gt.REALWORLD


def realworld_bugs(only: list[str]) -> list[Bug]:
    folder = ROOT / "examples" / "realworld"
    expected = json.loads((folder / "expected.json").read_text())
    bugs = []
    for name in sorted(n for n, info in expected.items() if info["verdict"] == "violations"):
        path = folder / name
        if only and not any(o in str(path) for o in only):
            continue
        text = path.read_text()
        bugs.append(Bug(f"realworld/{name}", path, text, gt.REALWORLD, _library(path, text)))
    return bugs


def _library(path: Path, text: str) -> bool:
    """Runs a real library's parallel layers (examples/models/ imports a test shim of Megatron instead)."""
    return path.parent.name != "models" and bool(LIBRARIES.search(text))


def mutant_bugs(count: int, library_count: int, seed: int, operators: list[str], only: list[str]) -> list[Bug]:
    """``library_count`` mutants of drivers around real libraries and ``count`` of the other files."""
    files = sorted((ROOT / "examples" / "models").glob("*.py")) + sorted((ROOT / "examples" / "realworld").glob("*.py"))
    for folder in sorted((ROOT / "examples").glob("realcode*")):
        files += sorted(folder.rglob("*.py"))
    if only:
        files = [f for f in files if any(o in str(f) for o in only)]
    found = []
    for path in files:
        text = path.read_text()
        try:
            found += [(path, m) for m in mutants_of(str(path.relative_to(ROOT)), text, operators)]
        except SyntaxError:
            continue
    by_digest = {m.digest: (path, m) for path, m in found}
    library = [m for path, m in found if _library(path, m.source)]
    plain = [m for path, m in found if not _library(path, m.source)]
    picked = stratified_sample(library, min(library_count, len(library)), seed) + \
        stratified_sample(plain, min(count, len(plain)), seed)
    bugs = []
    for m in picked:
        path = by_digest[m.digest][0]
        label = f"{m.origin}:{m.line} {m.operator} ({m.description})"
        bugs.append(Bug(label, path, m.source, _kind(path), _library(path, m.source)))
    return bugs


def truths(items: list[tuple[Bug, str]], folder: Path, timeout: float, cache: gt.Cache, log) -> list[gt.Truth]:
    """Real gloo runs (1 vs 2 and 4 ranks) of each (bug, text): the mutation campaign's runners."""
    requests = []
    for index, (bug, text) in enumerate(items):
        target = folder / f"gt{index}" / bug.origin.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        requests.append(gt.Request(str(target), bug.kind, bug.grad, hashlib.sha256(text.encode()).hexdigest()[:16]))
    return gt.ground_truth(requests, worlds=(2, 4), timeout=timeout, cache=cache, parallel=4, progress=log)


def _command() -> list[str]:
    exe = shutil.which("verify-agent")
    return [exe] if exe else [sys.executable, "-m", "verify_agent"]


class Worker:
    """``fix_worker.py``: the campaign's fix runs one after another in one process whose warm servers
    stay up between bugs (the same command entry, deadline and sandboxed runs; see that file)."""

    def __init__(self):
        env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
        self.process = subprocess.Popen([sys.executable, str(HERE / "fix_worker.py")], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                        cwd=str(ROOT))
        self.run: FixRun | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stderr:
            run = self.run
            if run is not None:
                run.take(line)
        run = self.run
        if run is not None:
            run.ended.set()   # the worker died (its exit code stays None)

    def send(self, run: FixRun, args: list[str]) -> None:
        self.run = run
        request = {"args": args, "file": str(run.copy), "stdout": str(run.copy.parent / "fix.out"),
                   "cwd": str(run.copy.parent)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


class FixRun:
    """``verify-agent fix --write`` on a copy of one bug, its stderr read with timestamps: in the
    campaign's worker (warm servers kept), or with ``worker=None`` as its own process (cold)."""

    def __init__(self, bug: Bug, folder: Path, timeout: float, worker: Worker | None = None):
        self.bug = bug
        self.copy = folder / bug.origin.name
        self.copy.parent.mkdir(parents=True, exist_ok=True)
        self.copy.write_text(bug.source)
        self.started = time.monotonic()
        self.first: float | None = None
        self.lines: list[str] = []
        self.code: int | None = None
        self.ended = threading.Event()
        self.worker = worker
        args = ["fix", str(self.copy), "--write", "--top", "1", "--no-backup", "--timeout", str(timeout)]
        self.deadline = self.started + timeout + 60
        self.out = ""
        if worker is not None:
            self.process = None
            worker.send(self, args)
            return
        env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
        self.process = subprocess.Popen(_command() + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env=env, cwd=str(folder))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def take(self, line: str) -> None:
        """One stderr line (each kept with the seconds since the run started); the worker's end marker."""
        if self.worker is not None and line.startswith(END_MARK):
            self.code = int(line.split()[1])
            self.ended.set()
            return
        self.lines.append(f"{time.monotonic() - self.started:6.1f} {line.rstrip()}")
        if self.first is None and FIRST_FIX in line:
            self.first = time.monotonic() - self.started

    def _read(self) -> None:
        for line in self.process.stderr:
            self.take(line)

    def _finished(self) -> bool:
        if self.worker is not None:
            return self.ended.is_set()
        return self.process.poll() is not None

    def poll(self) -> bool:
        if not self._finished():
            if time.monotonic() < self.deadline:
                return False
            if self.worker is not None:
                self.worker.kill()
                self.ended.wait(timeout=5)
            else:
                self.process.kill()
            self.bug.notes.append("killed after the tool's timeout")
        if self.worker is not None:
            self.worker.run = None
            out = self.copy.parent / "fix.out"
            self.out = out.read_text() if out.is_file() else ""
        else:
            self.out = self.process.stdout.read()
            self.process.wait()
            self.reader.join(timeout=5)
            self.code = self.process.returncode
        bug = self.bug
        bug.total = time.monotonic() - self.started
        bug.exit_code = self.code
        bug.seconds = self.first
        bug.progress = [ln for ln in self.lines if ln.split(None, 1)[1:] != []]
        text = self.copy.read_text()
        if text != bug.source:
            bug.patched = text
            shown = [ln for ln in self.lines if FIRST_FIX in ln]
            bug.description = shown[0].split(":", 1)[1].strip() if shown else "?"
        else:
            last = [ln for ln in self.out.splitlines() if ln.startswith(("VIOLATIONS", "VERIFIED", "UNSUPPORTED"))]
            bug.description = "no fix" + (f" ({last[-1].split()[0].lower()})" if last else
                                          f" (exit {bug.exit_code})")
        return True


def interleave(bugs: list[Bug]) -> list[Bug]:
    """Bugs in turn from the realworld files, library drivers' mutants and plain mutants, so a run cut
    short by --max-seconds still mixes them."""
    groups = [[b for b in bugs if b.label.startswith("realworld/")],
              [b for b in bugs if b.library and not b.label.startswith("realworld/")],
              [b for b in bugs if not b.library and not b.label.startswith("realworld/")]]
    out = []
    while any(groups):
        for group in groups:
            if group:
                out.append(group.pop(0))
    return out


def run_fixes(bugs: list[Bug], folder: Path, timeout: float, jobs: int, log, stop_at: float | None = None,
              cold: bool = False, finished=None) -> None:
    """``fix --write`` on each bug, ``jobs`` at once: each in a worker that keeps its warm servers
    between bugs (a worker killed at a bug's timeout is replaced), or ``cold`` one process per bug."""
    waiting = list(enumerate(bugs))
    running: list[FixRun] = []
    idle: list[Worker] = []
    done = 0
    while waiting or running:
        if stop_at is not None and time.monotonic() > stop_at and waiting:
            log(f"time limit: {len(waiting)} bug(s) not started")
            for _, bug in waiting:
                bug.notes.append(NOT_STARTED)
            waiting = []
        while waiting and len(running) < jobs:
            index, bug = waiting.pop(0)
            worker = None
            if not cold:
                idle = [w for w in idle if w.alive()]
                worker = idle.pop() if idle else Worker()
            running.append(FixRun(bug, folder / f"fix{index}", timeout, worker))
        for run in list(running):
            if run.poll():
                running.remove(run)
                if run.worker is not None and run.worker.alive():
                    idle.append(run.worker)
                done += 1
                bug = run.bug
                when = f"{bug.seconds:6.1f}" if bug.seconds is not None else "     -"
                log(f"[{done}/{len(bugs)}] {when} s  {bug.label}: {bug.description}")
                if finished is not None:
                    finished()
        time.sleep(0.2)
    for worker in idle:
        worker.process.stdin.close()
        worker.process.wait()


def report(bugs: list[Bug]) -> str:
    lines = [f"{'bug':<90} {'truth':>6} {'first fix':>9} {'written':>8} {'gloo':>7}  fix"]
    for bug in bugs:
        first = f"{bug.seconds:8.1f}s" if bug.seconds is not None else "        -"
        written = "-" if bug.patched is None else ("verifies" if bug.exit_code == 0 else f"exit {bug.exit_code}")
        lines.append(f"{bug.label[:90]:<90} {bug.truth:>6} {first} {written:>8} {bug.patched_truth or '-':>7}  "
                     f"{bug.description[:140]}")
    lines.append("")

    def share(group: list[Bug], name: str) -> str:
        fixed = sum(b.fixed for b in group)
        times = [b.seconds for b in group if b.fixed and b.seconds is not None]
        median = f"; median time to the first verified fix {statistics.median(times):.1f} s" if times else ""
        pct = f"{100 * fixed / len(group):.0f} %" if group else "-"
        return f"{name}: {fixed} of {len(group)} repaired ({pct}){median}"

    lines.append(share(bugs, "bugs (real gloo ranks show each one wrong)"))
    lines.append("  " + share([b for b in bugs if b.library], "in drivers around real libraries"))
    lines.append("  " + share([b for b in bugs if not b.library], "in plain torch.distributed code"))
    lines.append("  " + share([b for b in bugs if b.label.startswith("realworld/")], "realworld gallery's buggy files"))
    shown = [b for b in bugs if b.patched is not None]
    lines.append(f"fixes shown: {len(shown)}; written file does not verify again: "
                 f"{sum(b.exit_code != 0 for b in shown)}; {sum(b.refuted for b in bugs)} fixes shown that real "
                 f"ranks refute; not decided on real ranks: {sum(b.patched_truth not in (gt.AGREE, gt.DIFFER) for b in shown)}")
    return "\n".join(lines)


def _repaired(row: dict) -> bool:
    """A bug of a --json file repaired as ``Bug.fixed`` counts it."""
    return row["diff"] is not None and row["exit"] == 0 and row["written_truth"] == gt.AGREE


def combined(previous: list[dict], rerun: list[Bug]) -> str:
    """The figures over a previous run's bugs with its misses' outcomes replaced by the re-run's, and
    the bugs the previous run did not reach (its time limit) as the re-run found them."""
    again = {b.label: b for b in rerun}
    known = {row["bug"] for row in previous}
    table = [(row["library"], row["bug"].startswith("realworld/"), again[row["bug"]].fixed, again[row["bug"]].refuted,
              again[row["bug"]].seconds)
             if row["bug"] in again else
             (row["library"], row["bug"].startswith("realworld/"), _repaired(row),
              row["diff"] is not None and row["written_truth"] == gt.DIFFER, row["first_fix_seconds"])
             for row in previous]
    table += [(b.library, b.label.startswith("realworld/"), b.fixed, b.refuted, b.seconds)
              for b in rerun if b.label not in known]

    def share(group: list, name: str) -> str:
        fixed = sum(r[2] for r in group)
        times = [r[4] for r in group if r[2] and r[4] is not None]
        median = f"; median time to the first verified fix {statistics.median(times):.1f} s" if times else ""
        return f"{name}: {fixed} of {len(group)} repaired ({100 * fixed / max(1, len(group)):.0f} %){median}"

    return "\n".join([
        f"combined with the run before ({sum(label in known for label in again)} of its {len(previous)} bugs run "
        f"again, {sum(label not in known for label in again)} it had not run):",
        share(table, "bugs"), "  " + share([r for r in table if r[0]], "in drivers around real libraries"),
        "  " + share([r for r in table if not r[0]], "in plain torch.distributed code"),
        "  " + share([r for r in table if r[1]], "realworld gallery's buggy files"),
        f"{sum(r[3] for r in table)} fixes shown that real ranks refute"])


def rows(bugs: list[Bug], code: str) -> list[dict]:
    """The --json file's rows (``patched``: the written file, so a --resume can judge it again)."""
    return [{
        "bug": b.label, "library": b.library, "truth": b.truth, "first_fix_seconds": b.seconds,
        "fix_run_seconds": round(b.total, 1), "exit": b.exit_code, "fix": b.description,
        "written_truth": b.patched_truth, "notes": b.notes, "progress": b.progress[-80:],
        "diff": None if b.patched is None else "".join(difflib.unified_diff(
            b.source.splitlines(True), b.patched.splitlines(True), n=1)),
        "patched": b.patched, "code": code,
    } for b in bugs]


def resume(bugs: list[Bug], earlier: list[dict], code: str) -> list[Bug]:
    """Fill in the fix runs of ``earlier`` (a --json file) whose code digest is ``code``; the bugs left to run."""
    same = {row["bug"]: row for row in earlier if row.get("code") == code and row.get("exit") is not None
            and NOT_STARTED not in row.get("notes", [])}
    left = []
    for bug in bugs:
        row = same.get(bug.label)
        if row is None or (row["diff"] is not None and row.get("patched") is None):
            left.append(bug)
            continue
        bug.seconds, bug.total, bug.exit_code = row["first_fix_seconds"], row["fix_run_seconds"], row["exit"]
        bug.description, bug.patched, bug.progress = row["fix"], row.get("patched"), row["progress"]
        bug.notes = [n for n in row["notes"] if n != RESUMED and not n.startswith("ground truth")] + [RESUMED]
    return left


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_fix.py --campaign", description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=60,
                    help="communication mutants of the project's own files sampled (before ground truth)")
    ap.add_argument("--library-mutants", type=int, default=60,
                    help="communication mutants of drivers around real libraries sampled (before ground truth)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--operators", default=",".join(COMMUNICATION))
    ap.add_argument("--timeout", type=float, default=240.0, help="verify-agent fix --timeout per bug")
    ap.add_argument("--jobs", type=int, default=2, help="fix runs at once")
    ap.add_argument("--gt-timeout", type=float, default=8.0,
                    help="CPU seconds per rank of a ground-truth run (a run whose ranks all wait without using "
                         "CPU is a hang; the wall clock bounds it at 8 times this)")
    ap.add_argument("--only", nargs="*", default=[], help="files whose path contains one of these")
    ap.add_argument("--no-realworld", action="store_true", help="mutants only")
    ap.add_argument("--json", help="write every bug's outcome here")
    ap.add_argument("--max-seconds", type=float,
                    help="start no new fix after this long; the figures cover the bugs whose fix run finished")
    ap.add_argument("--cold", action="store_true",
                    help="each fix run its own verify-agent process (no warm server kept between bugs)")
    ap.add_argument("--cache-dir", default=str(HERE / "mutants" / "cache"))
    ap.add_argument("--rerun", metavar="JSON",
                    help="only the bugs a run written with --json did not repair or did not reach (same sampling "
                         "options), with figures combined over both runs")
    ap.add_argument("--resume", metavar="JSON",
                    help="take the fix runs a --json file of the same code holds, run the other bugs, report all")
    args = ap.parse_args(argv)
    code = code_digest()

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    started = time.monotonic()
    bugs = ([] if args.no_realworld else realworld_bugs(args.only)) + \
        mutant_bugs(args.mutants, args.library_mutants, args.seed, [o for o in args.operators.split(",") if o],
                    args.only)
    previous = json.loads(Path(args.rerun).read_text()) if args.rerun else None
    if previous is not None:
        ran = {row["bug"] for row in previous}
        missed = {row["bug"] for row in previous if not _repaired(row)}
        bugs = [b for b in bugs if b.label in missed or b.label not in ran]
        log(f"--rerun: {sum(b.label in missed for b in bugs)} of the {len(missed)} bugs {args.rerun} did not repair, "
            f"and {sum(b.label not in ran for b in bugs)} candidates it did not run (a time limit)")
    cache = gt.Cache(Path(args.cache_dir) if args.cache_dir else None)
    with tempfile.TemporaryDirectory(prefix="fix-campaign-") as tmp:
        folder = Path(tmp)
        log(f"{len(bugs)} candidate bugs; ground truth of the buggy files ...")
        for bug, truth in zip(bugs, truths([(b, b.source) for b in bugs], folder / "before", args.gt_timeout,
                                           cache, log)):
            bug.truth = truth.status
        left_out = [b for b in bugs if b.truth != gt.DIFFER]
        bugs = [b for b in bugs if b.truth == gt.DIFFER]
        log(f"{len(bugs)} bugs real ranks show wrong ({len(left_out)} left out: "
            + ", ".join(f"{s} {sum(b.truth == s for b in left_out)}" for s in sorted({b.truth for b in left_out}))
            + f"); fix --write on each, {args.jobs} at once ...")
        bugs = interleave(bugs)
        if previous is not None:   # the bugs the earlier run did not reach first, then its misses again
            bugs.sort(key=lambda b: b.label in missed)
        todo = bugs
        if args.resume:
            todo = resume(bugs, json.loads(Path(args.resume).read_text()), code)
            log(f"--resume: {len(bugs) - len(todo)} fix runs of the same code ({code}) taken from {args.resume}; "
                f"{len(todo)} to run")

        def save() -> None:   # after every bug: a killed run can be resumed
            if args.json:
                ran = [b for b in bugs if b.exit_code is not None or b.notes]
                Path(args.json).write_text(json.dumps(rows(ran, code), indent=1))

        run_fixes(todo, folder / "fix", args.timeout, args.jobs, log,
                  None if args.max_seconds is None else started + args.max_seconds, cold=args.cold, finished=save)
        skipped = [b for b in bugs if NOT_STARTED in b.notes]
        bugs = [b for b in bugs if NOT_STARTED not in b.notes]
        if skipped:
            print(f"time limit: {len(skipped)} of {len(bugs) + len(skipped)} bugs not run (figures below cover the "
                  f"{len(bugs)} run)")
        patched = [b for b in bugs if b.patched is not None]
        log(f"ground truth of {len(patched)} written files ...")
        for bug, truth in zip(patched, truths([(b, b.patched) for b in patched], folder / "after", args.gt_timeout,
                                              cache, log)):
            bug.patched_truth = truth.status
            if truth.status != gt.AGREE:
                bug.notes.append(truth.reason)
    print(report(bugs))
    taken = sum(RESUMED in b.notes for b in bugs)
    print(f"({time.monotonic() - started:.0f} s; fix --timeout {args.timeout:.0f} s, {args.jobs} at once; code {code}"
          + (f"; {taken} fix runs taken from {args.resume}, the same code)" if args.resume else ")"))
    if previous is not None:
        print(combined(previous, bugs))
    if args.json:
        Path(args.json).write_text(json.dumps(rows(bugs, code), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
