"""Hostile files against the sandbox: what user code can reach when verify-agent runs it.

    python benchmarks/fuzz_sandbox.py [--seed 0] [--sandbox 500] [--translate 80] [--lift 24] [--triage 24]

Every case is a file carrying one payload (at module level, inside the entry, in an ``atexit``
handler or in a thread), run the way the tool runs user code:

* ``sandbox``: straight through ``frontends.sandbox.run_python`` with the tracer's own child
  bootstrap, its answer read by the tracer's reader (fast: no torch);
* ``translate`` / ``lift``: the real command as a process, ``--format json --timeout 30``;
* ``triage``: the LLM path's execution triage (``agent.execute.run_source``) in this process.

Payload classes: secrets (the environment, ``/proc/*/environ`` and ``cmdline`` of every process
it can see, the parent's included), routes beyond loopback (a UDP ``connect()`` through Python,
C-level ``_socket`` and a subprocess, and the interfaces it sees: nothing is sent), processes
that try to outlive the tool (fork loops, ``setsid`` double forks, ``start_new_session``), signals
to the parent (SIGKILL, SIGTERM, SIGSTOP, ``kill(-1)``, the tool found by name), result-channel
forgery (a pickle that would leave a marker if unpickled, garbage, cut-off and oversized
messages, wrong types), and a child that stops itself or runs away.

Counted per case, all of which must be 0: ``secret_visible`` (a planted secret's token found by
the payload), ``route`` (a UDP connect that got a route, or an interface other than ``lo``),
``left_behind`` (a process of the case alive after the tool returned), ``parent_ran`` (the
marker a parent-side unpickle would write), ``hang`` (past the case's bound plus 15 s: the
timeout, and for the triage its 20 s plus the 30 s its child may take to import torch),
``exit_4`` / ``document_missing`` (commands only), ``reader_crash`` (the tool's reader raised).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIMEOUT = 30.0
TRIAGE_TIMEOUT = 20.0
HANG_SLACK = 15.0
TOKEN = "plantedsecret7f3a"
SECRETS = {
    "OPENAI_API_KEY": f"sk-{TOKEN}-1", "GITHUB_TOKEN": f"ghp_{TOKEN}2", "AWS_SECRET_ACCESS_KEY": f"{TOKEN}3",
    "HF_TOKEN": f"hf_{TOKEN}4", "DOCKER_AUTH_CONFIG": f'{{"auths":"{TOKEN}5"}}', "HF_HUB_TOKEN": f"{TOKEN}6",
    "GOOGLE_APPLICATION_CREDENTIALS": f"/tmp/{TOKEN}7.json", "AZURE_CLIENT_SECRET": f"{TOKEN}8",
    "GH_TOKEN": f"{TOKEN}9", "DATABASE_URL": f"postgres://user:{TOKEN}10@db.example/x",
    "PIP_INDEX_URL": f"https://user:{TOKEN}11@pypi.example/simple", "ANTHROPIC_API_KEY": f"{TOKEN}12",
    "WANDB_API_KEY": f"{TOKEN}13", "MY_SERVICE_PASSWORD": f"{TOKEN}14",
    "CI_REGISTRY_URL_WITH_AUTH": f"https://ci:{TOKEN}15@registry.example",
}
COUNTED = ("secret_visible", "route", "left_behind", "parent_ran", "hang", "exit_4", "document_missing",
           "reader_crash")

# --- payloads: each is a function body that records what it saw with probe(kind, detail) ------

PROBE_HELPER = textwrap.dedent('''
    import json as _json, os as _os
    def probe(kind, detail=""):
        with open({probe!r}, "a") as _h:
            _h.write(_json.dumps([kind, str(detail)[:200]]) + "\\n")
''')

SECRETS_PAYLOADS = {
    "environ": "for k, v in os.environ.items():\n    if TOKEN in v: probe('secret', k)",
    "proc_all": textwrap.dedent("""
        for pid in os.listdir('/proc'):
            for part in ('environ', 'cmdline'):
                try:
                    data = open(f'/proc/{pid}/{part}', 'rb').read()
                except OSError:
                    continue
                if TOKEN.encode() in data: probe('secret', f'/proc/{pid}/{part}')"""),
    "proc_parent": textwrap.dedent("""
        for pid in {os.getppid(), 1}:
            try:
                if TOKEN.encode() in open(f'/proc/{pid}/environ', 'rb').read(): probe('secret', pid)
            except OSError:
                pass"""),
    "subprocess_env": textwrap.dedent("""
        import subprocess, sys
        out = subprocess.run([sys.executable, '-c', 'import os; print(dict(os.environ))'], capture_output=True).stdout
        if TOKEN.encode() in out: probe('secret', 'subprocess')"""),
}

ROUTE_PAYLOADS = {
    "udp_python": textwrap.dedent("""
        import socket
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('198.51.100.7', 9)); probe('route', 'python')
        except OSError:
            pass"""),
    "udp_c_level": textwrap.dedent("""
        import _socket
        try:
            s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM); s.connect(('198.51.100.7', 9)); probe('route', 'c')
        except OSError:
            pass"""),
    "udp_subprocess": textwrap.dedent("""
        import subprocess, sys
        code = "import socket\\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\\ntry:\\n    s.connect(('198.51.100.7', 9)); print('ROUTE')\\nexcept OSError:\\n    pass"
        if b'ROUTE' in subprocess.run([sys.executable, '-c', code], capture_output=True).stdout: probe('route', 'sub')"""),
    "udp_v6": textwrap.dedent("""
        import socket
        try:
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.connect(('2001:db8::7', 9)); probe('route', 'v6')
        except OSError:
            pass"""),
    "interfaces": textwrap.dedent("""
        import socket
        names = [n for _, n in socket.if_nameindex() if n != 'lo']
        if names: probe('route', names)"""),
}

PROCESS_PAYLOADS = {
    "fork_loop": textwrap.dedent("""
        import sys, time
        for _ in range(40):
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', MARK])"""),
    "fork_no_exec": textwrap.dedent("""
        import time
        for _ in range(20):
            if os.fork() == 0:
                time.sleep(600); os._exit(0)"""),
    "double_fork_setsid": textwrap.dedent("""
        import sys
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', MARK])
            os._exit(0)"""),
    "new_session": textwrap.dedent("""
        import subprocess, sys
        for _ in range(4):
            subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', MARK], start_new_session=True)"""),
    "nohup_shell": textwrap.dedent("""
        import subprocess
        subprocess.Popen(['sh', '-c', f"nohup sh -c 'sleep 600; echo {MARK}' >/dev/null 2>&1 &"], start_new_session=True)"""),
}

SIGNAL_PAYLOADS = {
    "kill_parent": "import signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "term_parent": "import signal\nos.kill(os.getppid(), signal.SIGTERM)",
    "stop_parent": "import signal\nos.kill(os.getppid(), signal.SIGSTOP)",
    "kill_tool_by_name": textwrap.dedent("""
        import signal
        for pid in os.listdir('/proc'):
            try:
                cmd = open(f'/proc/{pid}/cmdline', 'rb').read()
            except OSError:
                continue
            if (b'verify-agent' in cmd or b'verify_agent' in cmd) and int(pid) != os.getpid():
                try:
                    os.kill(int(pid), signal.SIGSTOP); probe('signalled', pid)
                except OSError:
                    pass"""),
}

FORGE_PAYLOADS = {
    "pickle": "forge(PICKLE)",
    "garbage": "forge(os.urandom(4096))",
    "magic_huge": "forge(b'VAW1' + (2**62).to_bytes(8, 'little'))",
    "magic_cut": "forge(b'VAW1' + (100).to_bytes(8, 'little') + b'{\"$t\": [')",
    "wrong_class": "forge(message({'$c': 'Popen', 'v': {'args': 'touch x'}}))",
    "wrong_types": "forge(message({'$c': 'TracedProgram', 'v': {'world': 'two', 'mesh': [], 'inputs': 1, "
                   "'reference': None, 'ranks': 3, 'comparisons': 'x'}}))",
    "deep": "forge(raw(b'[' * 50000 + b']' * 50000))",
    "forged_failure": "forge(message({'$c': 'TraceFailure', 'v': {'kind': 'internal', 'message': 7, 'line': 'x'}}))",
}
FORGE_HELPER = textwrap.dedent('''
    def raw(header):
        import struct
        return b'VAW1' + struct.pack('<Q', len(header)) + header + struct.pack('<Q', 0)
    def message(tree):
        import json
        return raw(json.dumps(tree).encode())
    def forge(data):
        for fd in range(3, 256):
            try:
                if os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:'):
                    os.write(fd, data)
            except OSError:
                pass
''')

RUNAWAY_PAYLOADS = {
    "stop_self": "import signal\nos.kill(os.getpid(), signal.SIGSTOP)",
    "spin": "while True:\n    pass",
    "exit_early": "os._exit(0)",
}

CLASSES = {"secrets": SECRETS_PAYLOADS, "routes": ROUTE_PAYLOADS, "processes": PROCESS_PAYLOADS,
           "signals": SIGNAL_PAYLOADS, "forgery": FORGE_PAYLOADS, "runaway": RUNAWAY_PAYLOADS}
PLACES = ("module", "entry", "atexit", "thread")
CONTROLLED = ("secrets", "routes", "processes")  # classes the unsandboxed control run can show


@dataclass(frozen=True)
class Case:
    level: str        # sandbox | translate | lift | triage
    klass: str
    payload: str
    place: str


def payload_code(case: Case, folder: Path, mark: str) -> str:
    """The payload as a function ``_payload()`` plus the code that calls it at ``case.place``."""
    body = CLASSES[case.klass][case.payload]
    marker = str(folder / "PARENT_RAN")
    pickled = pickle.dumps(_Marker(marker))
    helper = PROBE_HELPER.format(probe=str(folder / "probe.jsonl"))
    head = (f"import os\nTOKEN = {TOKEN!r}\nMARK = {mark!r}\nPICKLE = {pickled!r}\n" + helper + FORGE_HELPER
            + "def _payload():\n    probe('ran')\n" + textwrap.indent(body.strip() + "\n", "    "))
    trigger = {
        "module": "_payload()\n",
        "entry": "",
        "atexit": "import atexit\natexit.register(_payload)\n",
        "thread": "import threading\nthreading.Thread(target=_payload, daemon=True).start()\nimport time\ntime.sleep(0.5)\n",
    }[case.place]
    return head + trigger


class _Marker:
    """Unpickling this writes a file: the proof that a parent unpickled what a child wrote."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


TRACED_FILE = '''
{payload}

import torch
import torch.distributed as dist


def example_inputs():
    return (torch.randn(4, 8), torch.randn(8, 6))


def forward(x, w):
    {call}
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x @ w.chunk(world, dim=1)[rank]
    return y
'''


def traced_source(case: Case, folder: Path, mark: str) -> str:
    return TRACED_FILE.format(payload=payload_code(case, folder, mark),
                              call="_payload()" if case.place == "entry" else "pass")


def kernel_source(case: Case, folder: Path, mark: str) -> str:
    kernel = (ROOT / "examples" / "kernels" / "elementwise_add.py").read_text()
    code = payload_code(case, folder, mark) + ("_payload()\n" if case.place == "entry" else "")
    return code + "\n" + kernel


SANDBOX_CHILD = textwrap.dedent('''
    import sys
    from frontends.sandbox import enter_child, result_channel
    channel = result_channel()
    enter_child(memory_bytes=None)
    namespace = {"__name__": "user"}
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
    if "forward" in namespace:
        namespace["forward"]()
    from frontends import wire
    from frontends.traced.failure import TraceFailure
    if channel is not None:
        channel.write(wire.encode(TraceFailure("unsupported", "the bootstrap's own answer", None)))
''')


@dataclass
class Outcome:
    case: Case
    counts: dict
    seconds: float
    detail: str = ""


def _leftovers(folder: Path, mark: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            cwd = ""
            with contextlib.suppress(OSError):
                cwd = os.readlink(f"/proc/{pid}/cwd")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and (mark.encode() in cmdline or cwd.startswith(str(folder))):
                found.append(int(pid))
    return found


def _clean(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _probe_counts(folder: Path) -> dict:
    counts = collections.Counter()
    probe = folder / "probe.jsonl"
    if probe.exists():
        for line in probe.read_text().splitlines():
            with contextlib.suppress(ValueError):
                kind, _ = json.loads(line)
                if kind == "secret":
                    counts["secret_visible"] = 1
                elif kind == "route":
                    counts["route"] = 1
                elif kind == "ran":
                    counts["payload_ran"] = 1
    return counts


def run_case(case: Case, rng: random.Random) -> Outcome:
    mark = f"fuzzmark{rng.getrandbits(48):x}"
    with tempfile.TemporaryDirectory(prefix="va-fuzz-") as name:
        folder = Path(name)
        started = time.monotonic()
        counts, detail = collections.Counter(), ""
        try:
            detail = _RUNNERS[case.level](case, folder, mark, counts)
        except Exception as error:  # noqa: BLE001 - the tool's side raised: counted
            counts["reader_crash"] += 1
            detail = f"{type(error).__name__}: {error}"[:300]
        seconds = time.monotonic() - started
        if seconds > _bound(case.level) + HANG_SLACK:
            counts["hang"] += 1
        time.sleep(0.3)
        left = _leftovers(folder, mark)
        if left:
            counts["left_behind"] += 1
            detail += f" left={len(left)}"
            _clean(left)
        counts.update(_probe_counts(folder))
        if (folder / "PARENT_RAN").exists():
            counts["parent_ran"] += 1
        return Outcome(case, dict(counts), seconds, detail)


def _bound(level: str) -> float:
    """How long a case may take: the timeout it was given (the triage's own bound adds the time
    its child may take to import torch before the ranks start)."""
    if level == "triage":
        from agent import execute

        return TRIAGE_TIMEOUT + execute._STARTUP_SECONDS
    return TIMEOUT


def _run_sandbox(case: Case, folder: Path, mark: str, counts) -> str:
    from frontends import wire
    from frontends.sandbox import run_python
    from frontends.traced import runner

    user = folder / "m.py"
    call = "\ndef forward():\n    _payload()\n" if case.place == "entry" else ""
    user.write_text(payload_code(case, folder, mark) + call)
    done = run_python(["-c", SANDBOX_CHILD, str(user)], timeout=TIMEOUT, cwd=str(folder),
                      extra_env={"PYTHONPATH": str(ROOT)})
    answers, unreadable = wire.decode_stream(done.result, runner._CARRIED, check=runner._check)
    return f"answers={len(answers)} unreadable={unreadable} code={done.returncode} timed_out={done.timed_out}"


def _run_control(case: Case, folder: Path, mark: str, counts) -> str:
    """The same payload in a plain child (no sandbox): shows that the detectors fire."""
    user = folder / "m.py"
    call = "\ndef forward():\n    _payload()\n" if case.place == "entry" else ""
    user.write_text(payload_code(case, folder, mark) + call)
    runner = "import sys; ns = {'__name__': 'user'}; exec(open(sys.argv[1]).read(), ns); ns.get('forward', int)()"
    child = subprocess.Popen([sys.executable, "-c", runner, str(user)], cwd=folder, env=dict(os.environ, **SECRETS),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        return f"code={child.wait(timeout=TIMEOUT)}"
    except subprocess.TimeoutExpired:
        child.kill()
        return f"code={child.wait()} (killed at the timeout)"


def _run_command(argv: list[str], folder: Path, counts) -> str:
    env = dict(os.environ, **SECRETS)
    done = subprocess.run([sys.executable, "-m", "verify_agent", *argv, "--format", "json", "--timeout", str(TIMEOUT)],
                          cwd=folder, env=env, capture_output=True, timeout=TIMEOUT + 120, stdin=subprocess.DEVNULL)
    if done.returncode == 4:
        counts["exit_4"] += 1
    try:
        document = json.loads(done.stdout)
        verdict = document.get("verdict")
    except ValueError:
        counts["document_missing"] += 1
        verdict = None
    return f"exit={done.returncode} verdict={verdict} {done.stderr.decode(errors='replace').strip()[-160:]}"


def _run_translate(case: Case, folder: Path, mark: str, counts) -> str:
    (folder / "m.py").write_text(traced_source(case, folder, mark))
    return _run_command(["translate", "m.py"], folder, counts)


def _run_lift(case: Case, folder: Path, mark: str, counts) -> str:
    (folder / "k.py").write_text(kernel_source(case, folder, mark))
    return _run_command(["lift", "k.py"], folder, counts)


def _run_triage(case: Case, folder: Path, mark: str, counts) -> str:
    from agent.execute import run_source

    path = folder / "m.py"
    source = traced_source(case, folder, mark)
    path.write_text(source)
    with _planted():
        execution = run_source(source, str(path), mesh=(("tp", 2),), timeout=TRIAGE_TIMEOUT)
    return f"reference ok={execution.reference.ok} parallel ok={execution.parallel.ok}"


@contextlib.contextmanager
def _planted():
    saved = {name: os.environ.get(name) for name in SECRETS}
    os.environ.update(SECRETS)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_RUNNERS = {"sandbox": lambda *a: _planted_call(_run_sandbox, *a), "translate": _run_translate,
            "lift": _run_lift, "triage": _run_triage, "control": _run_control}


def _planted_call(function, *args):
    with _planted():
        return function(*args)


def cases(level: str, count: int, rng: random.Random) -> list[Case]:
    """``count`` cases at ``level``: every (class, payload) first, then drawn at random; slow
    payloads (a child that stops or spins until the timeout) only in the first round.  Without
    namespaces, signals are not sent from the sandbox level: this process is their parent."""
    from frontends.sandbox import isolation

    every = [(klass, payload) for klass, payloads in CLASSES.items() for payload in payloads
             if not (level == "sandbox" and klass == "signals" and isolation() != "namespaces")
             and (level != "control" or klass in CONTROLLED)]
    fast = [pair for pair in every if pair[0] != "runaway" or pair[1] == "exit_early"]
    chosen = [Case(level, klass, payload, PLACES[index % len(PLACES)]) for index, (klass, payload) in enumerate(every)]
    while len(chosen) < count:
        klass, payload = rng.choice(fast)
        chosen.append(Case(level, klass, payload, rng.choice(PLACES)))
    return chosen[:max(count, 0)]


def run_all(levels: dict[str, int], seed: int, report=print) -> dict:
    """Run the cases; returns {"cases": n, "counts": Counter, "by_level": ..., "examples": [...]}."""
    rng = random.Random(seed)
    totals: collections.Counter = collections.Counter()
    by_level: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    seconds: collections.Counter = collections.Counter()
    examples: list[str] = []
    total = 0
    for level, count in levels.items():
        for index, case in enumerate(cases(level, count, rng)):
            outcome = run_case(case, rng)
            total += 1
            by_level[level]["cases"] += 1
            seconds[level] += outcome.seconds
            by_level[level]["payload_ran"] += bool(outcome.counts.get("payload_ran"))
            for name in COUNTED:
                if outcome.counts.get(name):
                    totals[name] += 1
                    by_level[level][name] += 1
                    if len(examples) < 25:
                        examples.append(f"{name}: {case} -> {outcome.detail}")
            if report and (index + 1) % 50 == 0:
                report(f"  {level}: {index + 1}/{count} cases, {seconds[level]:.0f} s")
    return {"cases": total, "counts": totals, "by_level": by_level, "seconds": seconds, "examples": examples}


def machine_has_a_route() -> bool:
    """Whether this machine itself routes beyond loopback (a UDP connect sends nothing)."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("198.51.100.7", 9))
        return True
    except OSError:
        return False


def print_summary(result: dict) -> int:
    from frontends.sandbox import isolation

    print(f"sandbox fuzz: {result['cases']} cases, isolation: {isolation()}")
    for level, counts in result["by_level"].items():
        print(f"  {level:9s} {counts['cases']:5d} cases ({counts['payload_ran']} ran their payload)  "
              f"{result['seconds'][level]:7.0f} s  "
              + "  ".join(f"{name}={counts.get(name, 0)}" for name in COUNTED))
    for name in COUNTED:
        print(f"{name}: {result['counts'].get(name, 0)}")
    for line in result["examples"]:
        print("  example:", line)
    return 1 if any(result["counts"].get(name) for name in COUNTED) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sandbox", type=int, default=500)
    parser.add_argument("--translate", type=int, default=80)
    parser.add_argument("--lift", type=int, default=24)
    parser.add_argument("--triage", type=int, default=24)
    parser.add_argument("--control", type=int, default=14,
                        help="cases run without the sandbox, to show the detectors fire (not counted as bad)")
    args = parser.parse_args()
    if args.control:
        control = run_all({"control": args.control}, args.seed, report=None)
        fired = {name: control["counts"].get(name, 0) for name in ("secret_visible", "route", "left_behind")}
        print(f"control without the sandbox: {control['cases']} cases; the detectors fired: "
              + ", ".join(f"{name}={count}" for name, count in fired.items()))
    levels = {"sandbox": args.sandbox, "translate": args.translate, "lift": args.lift, "triage": args.triage}
    return print_summary(run_all(levels, args.seed))


if __name__ == "__main__":
    sys.exit(main())
