"""Bad inputs and faults for the safety fuzzer (``benchmarks/fuzz.py``) and its sampled test.

A ``Case`` is files to write into an empty folder plus a command line.  ``run_in_process``
runs it through the real command functions (typer's CliRunner) and returns an ``Outcome``
with everything the fuzzer counts: tracebacks, internal errors, hangs, missing machine
documents, payloads executed (a ``MARK`` file appears).  Generators are plain functions of a
``random.Random``, so the fuzzer and hypothesis drive the same code.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = "__import__('os').system('touch MARK') or 4"
MODEL_SEEDS = ["dist_tp_mlp_missing_allreduce.py", "dist_tp_mlp_ok.py", "dist_rowparallel_gelu_on_partial.py",
               "dist_sequence_parallel_block_ok.py", "dist_async_read_before_wait.py", "dist_custom_autograd_f_ok.py"]
CASE_TIMEOUT = 120.0  # an in-process case running longer than this counts as a hang


@dataclass(frozen=True)
class Case:
    kind: str
    files: dict = field(default_factory=dict)  # name -> bytes
    argv: tuple = ()
    note: str = ""


@dataclass(frozen=True)
class Outcome:
    case: Case
    exit_code: Optional[int]
    seconds: float
    traceback: bool
    internal_error: bool
    hang: bool
    payload_ran: bool
    document_missing: bool
    detail: str = ""


def _seed_texts() -> list[str]:
    folder = ROOT / "examples" / "models"
    texts = [(folder / name).read_text() for name in MODEL_SEEDS if (folder / name).exists()]
    if not texts:
        texts = [path.read_text() for path in sorted(folder.glob("*.py"))[:5]]
    return texts


def _vir_texts() -> list[str]:
    return [path.read_text() for path in sorted((ROOT / "examples" / "ir").glob("*.vir"))[:8]]


_JUNK = ["(", ")", "[", "]", ":", "\t", "\x00", "é", "'", '"', "\\", "**", "1e309", "-", "\n", "    ", "lambda",
         "yield", "@", "…", "\r", "\ufeff", "#", "0", "-1", "10**12", "None", "dist.", "world", "rank"]


def mutate(text: str, rng: random.Random) -> str:
    """One random damage: delete, duplicate, insert junk, truncate, swap lines, or a payload/huge size."""
    if not text:
        return rng.choice(_JUNK)
    choice = rng.randrange(8)
    i, j = sorted(rng.randrange(len(text) + 1) for _ in range(2))
    if choice == 0:
        return text[:i] + text[j:]
    if choice == 1:
        return text[:j] + text[i:j] + text[j:]
    if choice == 2:
        return text[:i] + rng.choice(_JUNK) + text[i:]
    if choice == 3:
        return text[:i]
    if choice == 4:
        lines = text.splitlines(keepends=True)
        if len(lines) > 2:
            a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[a], lines[b] = lines[b], lines[a]
        return "".join(lines)
    digits = [k for k, c in enumerate(text) if c.isdigit() and (k == 0 or not text[k - 1].isalnum())]
    if not digits:
        return text + rng.choice(_JUNK)
    k = rng.choice(digits)
    end = k
    while end < len(text) and text[end].isdigit():
        end += 1
    replacement = {5: f'"{PAYLOAD}"', 6: rng.choice(["0", "-3", "10**9", "2**70", "1.5", "3"]),
                   7: f'"{rng.choice(["N", "4*N", "N//0", "(((", "1e3", PAYLOAD])}"'}[choice]
    return text[:k] + replacement + text[end:]


def python_case(rng: random.Random) -> Case:
    text = rng.choice(_seed_texts())
    for _ in range(rng.randrange(1, 4)):
        text = mutate(text, rng)
    command = rng.choice([["translate", "--llm", "off", "--no-exec"]] * 6 + [["fix", "--top", "1"]])
    fmt = rng.choice(["text", "json", "sarif", "github"])
    encoded = text.encode("utf-8", "surrogatepass") if rng.random() < 0.9 else text.encode("utf-16")
    return Case("python", {"model.py": encoded}, (*command, "model.py", "--format", fmt))


def vir_case(rng: random.Random) -> Case:
    text = rng.choice(_vir_texts())
    for _ in range(rng.randrange(1, 4)):
        text = mutate(text, rng)
    return Case("ir-text", {"prog.vir": text.encode("utf-8", "surrogatepass")},
                ("check", "prog.vir", "--format", rng.choice(["text", "json", "sarif"])))


def json_case(rng: random.Random) -> Case:
    from agent.ir_json import program_to_json
    from verifier.text_format import parse_program

    text = rng.choice(_vir_texts())
    try:
        document = program_to_json(parse_program(text, "seed.vir"))
        body = document if isinstance(document, str) else json.dumps(document)
    except Exception:  # noqa: BLE001 - a seed that does not convert still makes a bad input
        body = "{}"
    damage = rng.randrange(4)
    if damage == 0:
        body = mutate(body, rng)
    elif damage == 1:
        body = "[" * rng.choice([10, 1000, 100_000]) + "]" * rng.choice([0, 10])
    elif damage == 2:
        data = json.loads(body) if body.startswith("{") else {}
        if isinstance(data, dict) and data:
            key = rng.choice(sorted(data))
            data[key] = rng.choice([None, 1, "x", [], {}, [PAYLOAD], {"a": PAYLOAD}, "1" * 10000])
        body = json.dumps(data)
    else:
        body = body.replace('"', "", rng.randrange(1, 4))
    return Case("ir-json", {"prog.json": body.encode()}, ("check", "prog.json", "--format", "json"))


_OPTION_VALUES = ["", "x", "-1", "0", "tp=", "tp=0", "tp=x", "=2", "tp=2,tp=2", "tp=1000000", "dp=2,tp=2", "world=2",
                  "x=8x", "x=axb", "x=0x4", "=8x16", "x=99999999999x99999999999", "nan", "inf", "1e309",
                  "json", "yaml", "full", "maybe", "A=Shard(9)", "A=Bogus", PAYLOAD, "é", "\x00", "[/]", "[bold]x"]
_OPTIONS = ["--mesh", "--input", "--format", "--llm", "--entry", "--top", "--timeout", "--llm-deadline",
            "--max-rounds", "--kernel", "--spec", "--shard", "--base", "--solver-timeout", "--bogus", "-f"]


def option_case(rng: random.Random) -> Case:
    command = rng.choice(["translate", "fix", "check", "lift", "review", "nonsense"])
    target = rng.choice(["model.py", "missing.py", ".", "empty.py", "binary.py", "prog.vir", "/dev/null", ""])
    argv = [command] + ([target] if target else [])
    for _ in range(rng.randrange(1, 4)):
        option = rng.choice(_OPTIONS)
        argv += [option, rng.choice(_OPTION_VALUES)] if rng.random() < 0.9 else [option]
    if command in ("translate",) and "--llm" not in argv:
        argv += ["--llm", "off"]
    if command == "translate":
        argv += ["--no-exec"]
    files = {"model.py": (ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py").read_bytes(),
             "empty.py": b"", "binary.py": bytes(range(256)) * 4,
             "prog.vir": (_vir_texts() or ["mesh tp=2\n"])[0].encode()}
    return Case("options", files, tuple(argv))


def nested_cases() -> list[Case]:
    """Deep and huge inputs: each must end with an exit code, quickly, without allocating them."""
    head = "import torch\nimport torch.distributed as dist\n\n\ndef example_inputs():\n    return (torch.randn(4, 8),)\n\n\n"
    cases = []
    for n in (100, 300, 1000, 3000, 20000):
        cases.append(Case("nested", {"m.py": (head + "def forward(x):\n    y = x" + " + x" * n +
                                              "\n    dist.all_reduce(y)\n    return y\n").encode()},
                          ("translate", "m.py", "--llm", "off", "--no-exec", "--format", "json"), f"sum of {n}"))
        cases.append(Case("nested", {"m.py": (head + "def forward(x):\n    y = " + "-" * n + "x\n    return y\n"
                                              ).encode()},
                          ("fix", "m.py", "--format", "json"), f"unary chain of {n}"))
        cases.append(Case("nested", {"m.py": (head + "def forward(x):\n    y = " + "(" * n + "x" + ")" * n +
                                              "\n    return y\n").encode()},
                          ("translate", "m.py", "--llm", "off", "--no-exec", "--format", "sarif"), f"parens {n}"))
        body = "".join("    " * (k + 1) + "if x is not None:\n" for k in range(min(n, 150)))
        cases.append(Case("nested", {"m.py": (head + "def forward(x):\n" + body + "    " * (min(n, 150) + 1) +
                                              "return x\n").encode()},
                          ("translate", "m.py", "--llm", "off", "--no-exec", "--format", "json"), f"blocks {n}"))
        cases.append(Case("nested", {"p.json": ("[" * n + "]" * n).encode()}, ("check", "p.json", "--format", "json"),
                          f"json nesting {n}"))
        cases.append(Case("nested", {"p.vir": ("mesh tp=2\ndim H\ninput x: f32[" + "(" * n + "H" + ")" * n +
                                               "] R\n").encode()}, ("check", "p.vir", "--format", "json"),
                          f"vir dim nesting {n}"))
    big = head + "".join(f"def helper_{k}(x):\n    return x + {k}\n\n\n" for k in range(2000))
    cases.append(Case("huge", {"m.py": (big + "def forward(x):\n    dist.all_reduce(x)\n    return x\n").encode()},
                      ("translate", "m.py", "--llm", "off", "--no-exec", "--format", "json"), "2,000 functions"))
    cases.append(Case("huge", {"m.py": ("x = 1\n" * 600_000).encode()},
                      ("translate", "m.py", "--llm", "off", "--no-exec", "--format", "json"), "3.6 MB file"))
    cases.append(Case("huge", {"m.py": (head.replace("randn(4, 8)", "randn(1000000, 1000000)") +
                                        "def forward(x):\n    y = x.chunk(2, dim=0)[dist.get_rank()]\n"
                                        "    return y\n").encode()},
                      ("fix", "m.py", "--format", "json"), "7 TiB example inputs"))
    cases.append(Case("huge", {"m.py": (head + "def forward(x):\n    dist.all_reduce(x)\n    return x\n").encode()},
                      ("translate", "m.py", "--llm", "off", "--no-exec", "--mesh", "tp=1000000", "--format", "json"),
                      "mesh of a million ranks"))
    return cases


def slow_cases() -> list[Case]:
    """Inputs that used to run for minutes: they must stop at --timeout (run as real processes)."""
    head = "import torch\nimport torch.distributed as dist\n\n\ndef example_inputs():\n    return (torch.randn(4, 8),)\n\n\n"
    loop = head + "def forward(x):\n    for i in range(10**9):\n        x = x + 1\n    dist.all_reduce(x)\n    return x\n"
    sums = head + "def forward(x):\n    y = x\n" + "".join(f"    y = y + x * {k}\n" for k in range(10_000)) + \
        "    dist.all_reduce(y)\n    return y\n"
    return [Case("slow", {"m.py": loop.encode()}, ("translate", "m.py", "--llm", "off", "--no-exec", "--timeout", "20",
                                                   "--format", "json"), "range(10**9)"),
            Case("slow", {"m.py": sums.encode()}, ("translate", "m.py", "--llm", "off", "--no-exec", "--timeout", "20",
                                                   "--format", "json"), "10,000 statements"),
            Case("slow", {"m.py": loop.encode()}, ("fix", "m.py", "--timeout", "20", "--format", "sarif"),
                 "fix of range(10**9)")]


def llm_case(behaviour: str, url: str, rng: random.Random) -> Case:
    model = (ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py").read_bytes()
    return Case("llm", {"model.py": model},
                ("translate", "model.py", "--llm", "full", "--base-url", url, "--model", "m",
                 "--no-cache", "--no-exec", "--llm-deadline", "2", "--max-rounds", "2", "--format",
                 rng.choice(["json", "sarif", "text"])), behaviour)


@contextlib.contextmanager
def _alarm(seconds: float):
    def expired(signum, frame):  # noqa: ARG001
        raise TimeoutError("fuzz case hang")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def materialise(case: Case, folder: Path) -> None:
    for name, data in case.files.items():
        (folder / name).write_bytes(data)


def judge(case: Case, code: Optional[int], stdout: str, stderr: str, seconds: float, folder: Path,
          hang: bool, crashed: Optional[BaseException], timeout: float) -> Outcome:
    text = stdout + stderr
    fmt = None
    argv = list(case.argv)
    for index, arg in enumerate(argv):
        if arg in ("--format", "-f") and index + 1 < len(argv):
            fmt = argv[index + 1]
    document_missing = False
    if (fmt == "json" and crashed is None and code in (0, 1, 2, 3, 4) and argv
            and argv[0] in ("translate", "fix", "check", "lift")):
        try:
            json.loads(stdout)
        except ValueError:
            document_missing = True
    internal = code == 4 or crashed is not None
    detail = f"{type(crashed).__name__}: {crashed}" if crashed is not None else text.strip().splitlines()[-1:]
    return Outcome(case, code, seconds, "Traceback (most recent call last)" in text, internal,
                   hang or seconds > timeout, (folder / "MARK").exists() or Path("MARK").exists(), document_missing,
                   str(detail)[:300])


def run_in_process(case: Case, folder: Path, timeout: float = CASE_TIMEOUT) -> Outcome:
    """Run ``case`` through the console entry in this process (no deadline signals) from ``folder``."""
    import io

    from verify_agent.cli import main

    materialise(case, folder)
    previous = os.getcwd()
    os.chdir(folder)
    started = time.monotonic()
    hang, crashed, code = False, None, None
    out, err = io.StringIO(), io.StringIO()
    try:
        with _alarm(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(case.argv), arm_deadline=False)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except TimeoutError as error:
        if "fuzz case hang" in str(error):
            hang = True
        else:
            crashed = error
    except BaseException as error:  # noqa: BLE001 - anything escaping main is a bug to count
        crashed = error
    finally:
        os.chdir(previous)
    return judge(case, code, out.getvalue(), err.getvalue(), time.monotonic() - started, folder, hang, crashed,
                 timeout + 5)


def run_as_process(case: Case, folder: Path, grace: float = 30.0) -> Outcome:
    """Run ``case`` through the installed console entry (``python -m verify_agent``)."""
    import subprocess
    import sys

    materialise(case, folder)
    timeout = float(case.argv[case.argv.index("--timeout") + 1]) if "--timeout" in case.argv else 300.0
    started = time.monotonic()
    hang = False
    try:
        done = subprocess.run([sys.executable, "-m", "verify_agent", *case.argv], cwd=folder, capture_output=True,
                              timeout=timeout + grace, env={**os.environ, "VERIFY_AGENT_DEBUG": ""})
        code, stdout, stderr = done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode(
            "utf-8", "replace")
    except subprocess.TimeoutExpired as expired:
        hang, code = True, None
        stdout = (expired.stdout or b"").decode("utf-8", "replace")
        stderr = (expired.stderr or b"").decode("utf-8", "replace")
    return judge(case, code, stdout, stderr, time.monotonic() - started, folder, hang, None, timeout + grace)


GENERATORS: dict[str, Callable[[random.Random], Case]] = {
    "python": python_case, "ir-text": vir_case, "ir-json": json_case, "options": option_case}
