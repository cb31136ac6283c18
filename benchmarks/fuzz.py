"""Safety fuzzer: >= 1,000 bad inputs and faults; prints what must all be 0.

    python benchmarks/fuzz.py [--seed 0] [--per-kind 200] [--quick]

Categories (``tests/safety/fuzz_cases.py`` builds the inputs):

* malformed Python (random damage to gallery files, payload strings and absurd numbers where
  sizes go), ``.vir`` text and JSON IR, bogus command lines — in this process, through the
  console entry without its deadline signals;
* deep nesting and huge inputs (operator chains, parentheses, blocks, 3.6 MB files, 2,000
  functions, 7 TiB example inputs, a million-rank mesh);
* slow inputs as real processes with ``--timeout 20`` (``range(10**9)``, 10,000 statements);
* LLM endpoints on 127.0.0.1 failing every way (``tests/safety/fake_llm.py``);
* ``fix --write`` faults: a child killed at a random moment of the write, read-only files,
  edits saved while the fix is searched;
* hostile files against the sandbox (``fuzz_sandbox.py``: secrets, routes beyond loopback,
  processes outliving the tool, signals to it, forged answers, runaway children), through the
  sandbox itself and through ``translate``, ``lift`` and the LLM path's execution triage.

Counts printed: tracebacks, internal errors (exit 4 or an exception escaping the entry),
hangs past ``--timeout``, missing JSON documents, files lost or corrupted, payloads executed.
The exit status is 1 when any of them is not 0.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "safety"))
sys.path.insert(0, str(ROOT))

import fuzz_cases as fc  # noqa: E402
from fake_llm import BEHAVIOURS, FakeLLM  # noqa: E402
import fuzz_llm_and_write  # noqa: E402  (malformed LLM answers, exact and concurrent fix --write)
import fuzz_sandbox  # noqa: E402  (hostile files against the sandbox)

BAD = ("traceback", "internal_error", "hang", "document_missing", "payload_ran")


class Tally:
    def __init__(self) -> None:
        self.runs = collections.Counter()
        self.bad = collections.Counter()
        self.codes = collections.Counter()
        self.files_lost = 0
        self.examples: list[str] = []
        self.seconds = collections.Counter()

    def add(self, outcome: fc.Outcome) -> None:
        kind = outcome.case.kind
        self.runs[kind] += 1
        self.codes[(kind, outcome.exit_code)] += 1
        self.seconds[kind] += outcome.seconds
        for name in BAD:
            if getattr(outcome, name):
                self.bad[name] += 1
                if len(self.examples) < 20:
                    self.examples.append(f"{name}: {kind} {' '.join(outcome.case.argv)[:160]} -> {outcome.detail}")

    def lost(self, kind: str, ok: bool, note: str) -> None:
        self.runs[kind] += 1
        self.codes[(kind, "ok" if ok else "LOST")] += 1
        if not ok:
            self.files_lost += 1
            if len(self.examples) < 20:
                self.examples.append(f"file lost or corrupted: {kind}: {note}")


def run_generated(tally: Tally, rng: random.Random, per_kind: int) -> None:
    for kind, generate in fc.GENERATORS.items():
        for _ in range(per_kind):
            case = generate(rng)
            with tempfile.TemporaryDirectory() as folder:
                tally.add(fc.run_in_process(case, Path(folder)))


def run_nested(tally: Tally) -> None:
    for case in fc.nested_cases():
        with tempfile.TemporaryDirectory() as folder:
            tally.add(fc.run_in_process(case, Path(folder)))


def run_slow(tally: Tally) -> None:
    for case in fc.slow_cases():
        with tempfile.TemporaryDirectory() as folder:
            tally.add(fc.run_as_process(case, Path(folder)))


def run_llm(tally: Tally, rng: random.Random, repeats: int) -> None:
    for behaviour in BEHAVIOURS:
        with FakeLLM(behaviour, huge_bytes=5_000_000) as server:
            for _ in range(repeats):
                case = fc.llm_case(behaviour, server.url, rng)
                with tempfile.TemporaryDirectory() as folder:
                    outcome = fc.run_in_process(case, Path(folder), timeout=60)
                    if outcome.exit_code not in (2, 3):
                        outcome = fc.Outcome(outcome.case, outcome.exit_code, outcome.seconds, outcome.traceback,
                                             True, outcome.hang, outcome.payload_ran, outcome.document_missing,
                                             f"unexpected exit {outcome.exit_code}: {outcome.detail}")
                    tally.add(outcome)


KILLED_WRITER = textwrap.dedent("""
    import importlib.util, sys
    # load the one module by path: the child needs no verifier, solver or sympy to write a file
    spec = importlib.util.spec_from_file_location("safe_write", "verify_agent/repair/safe_write.py")
    safe_write = importlib.util.module_from_spec(spec)
    sys.modules["safe_write"] = safe_write  # dataclasses look their module up
    spec.loader.exec_module(safe_write)
    read_source, replace_source = safe_write.read_source, safe_write.replace_source
    source = read_source(sys.argv[1])
    print("start", flush=True)
    replace_source(source, sys.argv[2] * int(sys.argv[3]), backup=sys.argv[4] == "1")
    print("done", flush=True)
""")


def run_kills(tally: Tally, rng: random.Random, count: int) -> None:
    """A child replaces a file and is SIGKILLed after a random delay: old or new bytes, never anything else."""
    for index in range(count):
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "m.py"
            old = ("# -*- coding: utf-8 -*-\r\nx = 'é'\r\n" * 200).encode()
            target.write_bytes(b"\xef\xbb\xbf" + old)
            line, repeat = "y = 2\n", rng.choice([10, 100_000, 2_000_000])
            child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target), line, str(repeat),
                                      str(index % 2)], stdout=subprocess.PIPE, cwd=ROOT)
            child.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.3))
            child.send_signal(signal.SIGKILL)
            child.wait()
            data = target.read_bytes()
            new = b"\xef\xbb\xbf" + (line * repeat).replace("\n", "\r\n").encode()
            tally.lost("kill-during-write", data in (b"\xef\xbb\xbf" + old, new),
                       f"{len(data)} bytes after a kill (repeat {repeat})")


def run_read_only(tally: Tally, count: int) -> None:
    model = (ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py").read_bytes()
    for index in range(count):
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "model.py"
            target.write_bytes(model)
            os.chmod(target, 0o444 if index % 2 == 0 else 0o400)
            case = fc.Case("read-only", {}, ("fix", "model.py", "--write", "--format", "json", "--no-exec"))
            outcome = fc.run_in_process(case, Path(folder))
            tally.add(outcome)
            intact = target.read_bytes() == model and stat.S_IMODE(target.stat().st_mode) in (0o444, 0o400)
            tally.lost("read-only", intact and outcome.exit_code == 2, f"exit {outcome.exit_code}")


def run_concurrent_edits(tally: Tally, rng: random.Random, count: int) -> None:
    from verify_agent.pipeline import TranslateOptions
    from verify_agent.repair.commands import UsageError, fix_file

    model = (ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py").read_text()
    for _ in range(count):
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "model.py"
            target.write_text(model)
            edited = model + f"\n# the user's edit {rng.random()}\n"
            when = rng.randrange(1, 6)
            calls = []

            def user_edit(message: str) -> None:
                calls.append(message)
                if len(calls) == when:
                    target.write_text(edited)

            try:
                _, _, after = fix_file(target, write=True, progress=user_edit, options=TranslateOptions(no_exec=True))
                refused = False
            except UsageError:
                refused = True
            content = target.read_text()
            if len(calls) >= when:  # the edit happened during the command: it must survive
                ok = refused and content == edited
            else:  # the command finished first: the fixed file verifies
                ok = after is not None and after.verdict == "verified"
            tally.lost("concurrent-edit", ok, f"edit at progress call {when} of {len(calls)}, refused={refused}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-kind", type=int, default=230, help="generated cases per kind (4 kinds)")
    parser.add_argument("--quick", action="store_true", help="a small run (about 100 cases)")
    args = parser.parse_args()
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VERIFY_AGENT_MODEL", "HTTP_PROXY", "HTTPS_PROXY",
                 "http_proxy", "https_proxy"):
        os.environ.pop(name, None)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    rng = random.Random(args.seed)
    per_kind = 15 if args.quick else args.per_kind
    tally = Tally()
    started = time.monotonic()
    steps = [("generated", lambda: run_generated(tally, rng, per_kind)),
             ("nested and huge", lambda: run_nested(tally)),
             ("LLM failures", lambda: run_llm(tally, rng, 1 if args.quick else 3)),
             ("kills during fix --write", lambda: run_kills(tally, rng, 4 if args.quick else 30)),
             ("read-only files", lambda: run_read_only(tally, 2 if args.quick else 6)),
             ("concurrent edits", lambda: run_concurrent_edits(tally, rng, 2 if args.quick else 10)),
             ("slow inputs (processes, --timeout 20)", lambda: run_slow(tally))]
    steps[-1:-1] = fuzz_llm_and_write.steps(tally, rng, args.quick)
    for name, step in steps:
        before = sum(tally.runs.values())
        step_started = time.monotonic()
        step()
        print(f"{name}: {sum(tally.runs.values()) - before} cases in {time.monotonic() - step_started:.0f} s",
              file=sys.stderr, flush=True)
    total = sum(tally.runs.values())
    print(f"fuzz: {total} bad inputs and faults in {time.monotonic() - started:.0f} s (seed {args.seed})")
    for kind, runs in sorted(tally.runs.items()):
        codes = ", ".join(f"{code}: {n}" for (k, code), n in sorted(tally.codes.items(), key=str) if k == kind)
        print(f"  {kind:18} {runs:5}  exits {codes}")
    counts = {"tracebacks": tally.bad["traceback"], "internal errors": tally.bad["internal_error"],
              "hangs past --timeout": tally.bad["hang"], "missing JSON documents": tally.bad["document_missing"],
              "files lost or corrupted": tally.files_lost, "payloads executed": tally.bad["payload_ran"]}
    for name, value in counts.items():
        print(f"{name:26} {value}")
    for example in tally.examples:
        print("  " + example)
    levels = ({"sandbox": 60, "translate": 12, "lift": 4, "triage": 4} if args.quick
              else {"sandbox": 500, "translate": 80, "lift": 24, "triage": 24})
    isolation = fuzz_sandbox.run_all(levels, args.seed,
                                     report=lambda line: print(line, file=sys.stderr, flush=True))
    hostile = fuzz_sandbox.print_summary(isolation)
    print(f"fuzz overall: {total + isolation['cases']} cases")
    return 1 if any(counts.values()) or hostile else 0


if __name__ == "__main__":
    sys.exit(main())
