"""Fuzz classes for the LLM endpoint's answers and for ``fix --write`` (used by ``benchmarks/fuzz.py``).

* ``llm-malformed``: a real server on 127.0.0.1 answers ``translate --llm full`` with a generated
  malformed body (truncated JSON, random bytes, JSON of the wrong shape, HTML pages, error
  statuses with odd bodies, a body cut short, a hang): exit 3, never 4, a document for json/sarif;
* ``fix-write-exact``: ``fix --write`` on the buggy MLP with random per-line endings, a BOM or
  not, no final newline, tab-indented comment lines, 0-2 extra hard links, with or without a
  backup: the file is the original plus the one fix line, byte for byte; every link sees it;
  no other file appears or changes;
* ``fix-write-race``: two ``fix --write`` processes on one file at once: one writes; the other is
  refused (exit 2) or, having read the file after the winner wrote it, finds nothing to fix;
  both print a JSON document, and the file holds exactly one fix;
* ``write-lock-race``: two writers racing inside ``replace_source`` on a slow disk: one writes,
  one is refused, the file is one of theirs.

Each function takes the fuzzer's tally (``add(outcome)``, ``lost(kind, ok, note)``), a seeded
``random.Random`` and a count; ``steps(tally, rng, quick)`` lists them for ``fuzz.py``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT / "tests" / "safety", ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import fuzz_cases as fc  # noqa: E402
from malformed_llm import RawLLM, generated  # noqa: E402
from verify_agent.repair.safe_write import decode_source  # noqa: E402

BUGGY = ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py"
FIX_LINE = b"    dist.all_reduce(y)"
PREFIXES = ("LLM unavailable: ", "LLM gave an invalid answer: ")


def _unexpected(outcome: fc.Outcome, why: str) -> fc.Outcome:
    """The outcome counted as an internal error (the fuzzer's tally counts it and shows ``why``)."""
    return fc.Outcome(outcome.case, outcome.exit_code, outcome.seconds, outcome.traceback, True, outcome.hang,
                      outcome.payload_ran, outcome.document_missing, f"{why}: {outcome.detail}")


def run_malformed_llm(tally, rng, count: int) -> None:
    """``translate --llm full`` against generated malformed answers: exit 3 and one line, every time."""
    model = BUGGY.read_bytes()
    for _ in range(count):
        kind, reply = generated(rng)
        fmt = rng.choice(["json", "json", "sarif", "text"])
        with RawLLM(reply) as server, tempfile.TemporaryDirectory() as folder:
            case = fc.Case("llm-malformed", {"model.py": model},
                           ("translate", "model.py", "--llm", "full", "--base-url", server.url, "--model", "m",
                            "--no-cache", "--no-exec", "--llm-deadline", "1", "--max-rounds", "2", "--format", fmt),
                           kind)
            outcome, stdout = _run_keeping_stdout(case, Path(folder))
            if outcome.exit_code != 3:
                outcome = _unexpected(outcome, f"{kind}: exit {outcome.exit_code}, expected 3")
            elif fmt == "json":
                try:
                    message = json.loads(stdout)["diagnostics"][0]["message"]
                except (ValueError, LookupError, TypeError):
                    message = ""
                # an answer that parses as a completion but is no IR is the loop's: "the LLM's IR ..."
                if not message.startswith(PREFIXES) and "LLM's IR" not in message:
                    outcome = _unexpected(outcome, f"{kind}: first diagnostic {message[:80]!r}")
            tally.add(outcome)


def _run_keeping_stdout(case: fc.Case, folder: Path) -> tuple[fc.Outcome, str]:
    """``fc.run_in_process``, and what the command printed on stdout (its judge sees it; so do we)."""
    printed: list[str] = []
    judge = fc.judge

    def keeping(case, code, stdout, *rest):
        printed.append(stdout)
        return judge(case, code, stdout, *rest)

    fc.judge = keeping
    try:
        outcome = fc.run_in_process(case, folder, timeout=60)
    finally:
        fc.judge = judge
    return outcome, printed[-1] if printed else ""


def _variant(rng) -> bytes:
    """The buggy MLP with random line endings, comment lines with tabs, maybe a BOM, maybe no final newline."""
    lines = BUGGY.read_text().rstrip("\n").split("\n")
    for _ in range(rng.randrange(0, 4)):
        lines.insert(rng.randrange(0, len(lines) + 1), rng.choice(["#\tnote\t", "\t", "# x \t y", ""]))
    crlf = rng.random()
    ended = [line + ("\r\n" if rng.random() < crlf else "\n") for line in lines]
    if rng.random() < 0.3:
        ended[-1] = ended[-1].rstrip("\r\n")
    data = "".join(ended).encode()
    return (b"\xef\xbb\xbf" + data) if rng.random() < 0.2 else data


def _without_fix(data: bytes) -> bytes:
    start = data.index(FIX_LINE)
    end = data.index(b"\n", start) + 1
    return data[:start] + data[end:]


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {path.name: (path.stat().st_ino, path.read_bytes()) for path in sorted(folder.iterdir())}


def run_fix_write_exact(tally, rng, count: int) -> None:
    """``fix --write`` changes the fix's line and nothing else, through every hard link."""
    for _ in range(count):
        original = _variant(rng)
        links = rng.choice([0, 0, 1, 2])
        backup = rng.random() < 0.7
        argv = ("fix", "model.py", "--write", "--format", "json", "--no-exec") + (() if backup else ("--no-backup",))
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            (folder / "model.py").write_bytes(original)
            for index in range(links):
                os.link(folder / "model.py", folder / f"link{index}.py")
            before = _snapshot(folder)
            case = fc.Case("fix-write-exact", {}, argv, f"{links} link(s), backup={backup}")
            outcome = fc.run_in_process(case, folder)
            tally.add(outcome)
            after = _snapshot(folder)
            written = after.get("model.py", (0, b""))[1]
            expected_names = set(before) | ({"model.py.orig"} if backup else set())
            problems = []
            if outcome.exit_code != 0:
                problems.append(f"exit {outcome.exit_code}")
            if set(after) != expected_names:
                problems.append(f"files {sorted(after)}")
            if written.count(FIX_LINE) != 1 or _without_fix(written) != original:
                problems.append("bytes outside the fix changed")
            if any(after.get(f"link{i}.py") != after.get("model.py") for i in range(links)):
                problems.append("a hard link does not see the fix")
            if links and after["model.py"][0] != before["model.py"][0]:
                problems.append("the inode changed")
            if backup and after.get("model.py.orig", (0, b""))[1] != original:
                problems.append("the backup is not the original")
            tally.lost("fix-write-exact", not problems, "; ".join(problems) + f" ({case.note})")


def run_fix_write_race(tally, rng, count: int) -> None:
    """Two ``fix --write`` processes at once on one file: exactly one writes, the other exits 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VERIFY_AGENT_DEBUG": ""}
    argv = ("fix", "model.py", "--write", "--format", "json", "--no-exec")
    for _ in range(count):
        original = _variant(rng)
        links = rng.choice([0, 1])
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            (folder / "model.py").write_bytes(original)
            for index in range(links):
                os.link(folder / "model.py", folder / f"link{index}.py")
            started = time.monotonic()
            racers = [subprocess.Popen([sys.executable, "-m", "verify_agent", *argv], cwd=folder, env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
            codes, documents = [], []
            for racer in racers:
                try:
                    out, err = racer.communicate(timeout=300)
                    hang = False
                except subprocess.TimeoutExpired:
                    racer.kill()
                    out, err = racer.communicate()
                    hang = True
                codes.append(racer.returncode)
                try:
                    documents.append(json.loads(out))
                except ValueError:
                    documents.append({})
                case = fc.Case("fix-write-race", {}, argv, f"{links} link(s)")
                tally.add(fc.judge(case, None if hang else racer.returncode, out.decode("utf-8", "replace"),
                                   err.decode("utf-8", "replace"), time.monotonic() - started, folder, hang, None,
                                   300))
            written = (folder / "model.py").read_bytes()
            # one writes; the other is refused (2) or read the file only once it was fixed (0, no write)
            wrote = [code == 0 and "before" in document for code, document in zip(codes, documents)]
            other = [(code, document.get("verdict")) for code, document, won in zip(codes, documents, wrote)
                     if not won]
            ok = (wrote.count(True) == 1 and other[0] in ((2, "input-error"), (0, "verified"))
                  and written.count(FIX_LINE) == 1 and _without_fix(written) == original
                  and (folder / "model.py.orig").read_bytes() == original
                  and not (folder / "model.py.orig.1").exists()
                  and all((folder / f"link{i}.py").read_bytes() == written for i in range(links)))
            tally.lost("fix-write-race", ok, f"exits {codes}, {links} link(s)")
            tally.codes[("fix-write-race", "refused" if 2 in codes else "read after the winner")] += 1


RACER = textwrap.dedent("""
    import os, sys, time
    from verify_agent.repair.safe_write import WriteRefused, read_source, replace_source
    target, name, go, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    source = read_source(target)
    real_fsync = os.fsync
    def slow_fsync(fd):
        time.sleep(pause)
        real_fsync(fd)
    os.fsync = slow_fsync
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    try:
        text = source.text + ("" if source.text.endswith("\\n") or not source.text else "\\n")
        replace_source(source, text + f"# written by {name}\\n", backup=name == "a")
        print("wrote", flush=True)
    except WriteRefused as refused:
        print("refused", refused, flush=True)
""")


def appended(text: str, who: str) -> str:
    """What racer ``who`` writes (as ``RACER`` does): the file's text and one comment line of its own."""
    return text + ("" if text.endswith("\n") or not text else "\n") + f"# written by {who}\n"


def run_write_lock_race(tally, rng, count: int) -> None:
    """Two writers inside ``replace_source`` released at once on a slow disk: one writes, one is refused."""
    for _ in range(count):
        original = _variant(rng)
        links = rng.choice([0, 1])
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            target = folder / "m.py"
            target.write_bytes(original)
            for index in range(links):
                os.link(target, folder / f"link{index}.py")
            go = folder / "go"
            pause = f"{rng.uniform(0.0, 0.3):.3f}"
            racers = [subprocess.Popen([sys.executable, "-c", RACER, str(target), who, str(go), pause], cwd=ROOT,
                                       stdout=subprocess.PIPE, text=True) for who in ("a", "b")]
            for racer in racers:
                racer.stdout.readline()
            go.touch()
            answers = [racer.communicate(timeout=120)[0].strip().split(" ", 1)[0] for racer in racers]
            written = target.read_bytes()
            read = decode_source(target, original)
            candidates = {who: read.encode(appended(read.text, who)) for who in "ab"}
            winner = "ab"[answers.index("wrote")] if answers.count("wrote") == 1 else None
            ok = sorted(answers) == ["refused", "wrote"] and winner is not None and written == candidates[winner]
            tally.lost("write-lock-race", ok, f"answers {answers}, pause {pause}, {links} link(s)")


def steps(tally, rng, quick: bool) -> list:
    """(name, step) pairs for ``fuzz.py``'s run."""
    return [("malformed LLM answers", lambda: run_malformed_llm(tally, rng, 20 if quick else 300)),
            ("fix --write: endings, BOMs, hard links", lambda: run_fix_write_exact(tally, rng, 10 if quick else 120)),
            ("fix --write: two processes at once", lambda: run_fix_write_race(tally, rng, 2 if quick else 12)),
            ("fix --write: racing writers on a slow disk", lambda: run_write_lock_race(tally, rng,
                                                                                       4 if quick else 40))]
