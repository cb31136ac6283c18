"""The confirmation child: run the user's code for real, on one device and on N gloo ranks.

``python .../frontends/traced/confirm_child.py`` is started by ``confirm.py`` through
``frontends.sandbox.run_python``.  It is the supervisor: it reads one message (``message.py``)
on stdin naming the runs to make, each with the values its leaves must take, starts one process
per run (``confirm_child.py run``): the single-device run on a gloo group of one, and ranks
0..N-1 of one gloo group over 127.0.0.1, all inside the supervisor's sandbox so that the ranks
can reach each other.  It answers with one message holding every run's outputs and gradients.
Run processes write their answer to a pipe the supervisor gave them; the user's prints go
nowhere.  The supervisor itself runs no user code.

A run builds the entry, its inputs and parameters exactly as the tracing run does
(``run.py``'s helpers: a fresh import, the same seed, the same construction), then gives each
named leaf the counterexample's value: entry inputs by name, parameters by module path (a
rank's parameter gets the piece the verifier cut for it), the cotangent of each output, and
random draws by their line and occurrence (``random_L<line>_<n>``, as the recorder names
them).  Every value is what torch computes with real collectives; nothing is simulated.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time

_PEER_GRACE_S = 2.0        # after a rank raises, its peers may still be blocked in a collective
# Every unfinished rank used almost no CPU (under _IDLE_RATE of a core, plus _IDLE_SLACK_S for the clock's
# ticks) for this long, and for twice as long as the one-device run took, after it ended: the ranks wait for
# each other (a deadlock), not for the machine.  A rank blocked in gloo still polls (about 0.4 % of a core,
# measured); one that computes gets its share of the machine, far above 1 % unless 100 processes compete.
_HANG_IDLE_S, _IDLE_RATE, _IDLE_SLACK_S = 10.0, 0.01, 0.05
# Or it spins: a rank blocked in some gloo collectives polls at full speed (measured: 92 % of a core in
# all_gather behind a receive never waited on).  CPU time does not depend on the machine's load, and a rank
# does at most about the one-device run's work: one that has used, since the one-device run ended, more than
# _SPIN_FACTOR times that whole run's CPU time (its imports included) and _SPIN_CPU_S more is not computing
# towards an answer.
_SPIN_FACTOR, _SPIN_CPU_S = 2.0, 10.0


# --- the supervisor --------------------------------------------------------------------------------

def supervise() -> int:
    from frontends import sandbox
    from frontends.traced.message import pack, unpack

    channel = sandbox.result_channel()
    meta, arrays = unpack(sys.stdin.buffer.read())
    with contextlib.suppress(Exception):
        sandbox.enter_child(memory_bytes=None)   # the parent set the limits; loopback up, no network
    cpu_budget = float(meta["timeout"])
    deadline = time.monotonic() + float(meta.get("wall", cpu_budget))
    port = sandbox.free_loopback_port()
    runs = []
    for position, run in enumerate(meta["runs"]):
        mine = {name.split(":", 1)[1]: value for name, value in arrays.items()
                if name.split(":", 1)[0] == str(position)}
        request = pack({**meta["common"], **run, "port": port}, mine)
        runs.append(_Run(run["world"], run["rank"], request))
    for run in runs:   # every run process first, then the threads that feed and read them (a fork
        run.spawn()     # from a process with threads running is not safe)
    for run in runs:
        run.start_readers()
    _wait(runs, cpu_budget, deadline)
    answers, out_arrays = [], {}
    for position, run in enumerate(runs):
        answer, values = run.answer()
        answers.append(answer)
        out_arrays.update({f"{position}:{name}": value for name, value in values.items()})
    if channel is not None:
        channel.write(pack({"runs": answers}, out_arrays))
        channel.close()
    return 0


class _Run:
    """One run process and what it answered."""

    def __init__(self, world: int, rank: int, request: bytes) -> None:
        self.world, self.rank, self.request = world, rank, request
        self.data = b""
        self.status: str | None = None   # of the run's answer, once it has ended
        self.stderr = b""
        self.killed = False
        self.hung = False   # stopped while blocked with its peers (``_hung``)
        self.process: subprocess.Popen | None = None
        self.read_end = -1
        self.readers: list[threading.Thread] = []

    def spawn(self) -> None:
        from frontends.sandbox import RESULT_FD_VARIABLE

        read_end, write_end = os.pipe()
        if "torch" in sys.modules:   # forked from a warm server (frontends/fork_server.py): fork the run too
            self.process = _fork_run(write_end)
        else:
            env = dict(os.environ, **{RESULT_FD_VARIABLE: str(write_end)})
            self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "run"],
                                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            env=env, pass_fds=(write_end,))
        os.close(write_end)
        self.read_end = read_end

    def start_readers(self) -> None:
        read_end = self.read_end

        def feed() -> None:
            with contextlib.suppress(OSError):
                self.process.stdin.write(self.request)
                self.process.stdin.close()

        def collect() -> None:
            with os.fdopen(read_end, "rb") as handle:
                self.data = handle.read()

        def errors() -> None:
            self.stderr = self.process.stderr.read()[-4000:]

        self.readers = [threading.Thread(target=f, daemon=True) for f in (feed, collect, errors)]
        for thread in self.readers:
            thread.start()

    @property
    def done(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def raised(self) -> bool:
        """The run ended with the user's code raising (its peers may be stuck in a collective)."""
        if self.status is None and self.done and not self.killed:
            from frontends.traced.message import MessageError, unpack

            self.readers[1].join(timeout=5)   # the answer is read to its end
            try:
                self.status = str(unpack(self.data)[0].get("status"))
            except MessageError:
                self.status = "unreadable"
        return self.status == "raised"

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.killed = True
            self.process.kill()

    def answer(self):
        from frontends.traced.message import MessageError, unpack

        for thread in self.readers:
            thread.join(timeout=5)
        base = {"world": self.world, "rank": self.rank}
        if self.killed and not self.data and self.hung:
            return {**base, "status": "hung", "error": "blocked: every unfinished rank waited (using under "
                                                      f"{100 * _IDLE_RATE:g} % of a core for {_HANG_IDLE_S:g} s, or "
                                                      f"spinning at over {_SPIN_FACTOR:g} times the one-device run's "
                                                      f"CPU) after one device finished"}, {}
        if self.killed and not self.data:
            return {**base, "status": "stopped", "error": "stopped: a peer rank had failed, or the time ran out"}, {}
        try:
            meta, values = unpack(self.data)
        except MessageError:
            tail = self.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            code = self.process.returncode if self.process is not None else None
            return {**base, "status": "crashed", "error": f"the run ended with code {code}: {tail[0]}"}, {}
        return {**base, **meta}, values


def _fork_run(result_fd: int):
    """A run process forked from this one (torch already imported), as ``confirm_child.py run`` would
    start: its stdin and stderr are pipes, stdout goes nowhere, it answers on ``result_fd``."""
    import io

    from frontends.fork_server import Forked
    from frontends.sandbox import RESULT_FD_VARIABLE

    in_r, in_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(in_r, 0)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(err_w, 2)
            os.closerange(3, result_fd)   # the other runs' pipes and the supervisor's answer channel among them
            os.closerange(result_fd + 1, 1 << 16)
            os.environ[RESULT_FD_VARIABLE] = str(result_fd)
            sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)))
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), line_buffering=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), line_buffering=True)
            code = run_one()
        except BaseException:   # noqa: BLE001 - said on the run's stderr, as a crashed process would
            import traceback

            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(in_r)
    os.close(err_w)
    return Forked(pid, os.fdopen(in_w, "wb"), None, os.fdopen(err_r, "rb"))


def _wait(runs: list[_Run], cpu_budget: float, deadline: float) -> None:
    """Until every run ends; a rank that raised stops its peers after a grace period.  The runs stop
    when together they have used ``cpu_budget`` CPU seconds (the same on a busy machine as on an idle
    one), or at the wall-clock ``deadline``, the outer bound (a hang uses no CPU)."""
    from frontends import sandbox

    stop_peers_at = None
    used: dict[int, float] = {}
    idle = _Idle(runs)
    while not all(run.done for run in runs):
        now = time.monotonic()
        if now >= deadline:
            break
        for run in runs:   # CPU time only grows: a run gone (read as 0) keeps what it last used
            if run.process is not None:
                pid = run.process.pid
                used[pid] = max(used.get(pid, 0.0), sandbox.cpu_seconds_of(pid))
        if sum(used.values()) >= cpu_budget:
            break
        if idle.hung(now, used):
            for run in runs:
                run.hung = not run.done
            break
        if stop_peers_at is None and any(run.world > 1 and run.raised() for run in runs):
            stop_peers_at = now + _PEER_GRACE_S
        if stop_peers_at is not None and now >= stop_peers_at:
            break
        time.sleep(0.05)
    for run in runs:
        run.kill()
    for run in runs:
        if run.process is not None:
            with contextlib.suppress(Exception):
                run.process.wait(timeout=5)


class _Idle:
    """Whether the ranks are blocked on each other: every one-device run has ended, and every unfinished
    rank has used almost no CPU (``_IDLE_RATE``) for ``_HANG_IDLE_S`` (and twice the one-device run's time)
    since, or spins (``_SPIN_FACTOR``).  A rank that computes, however busy the machine, gets its share of a
    core in that time; one blocked in a receive or a collective whose peer never comes only polls."""

    def __init__(self, runs: list[_Run]) -> None:
        self.runs, self.started = runs, time.monotonic()
        self.single_ended: float | None = None
        self.single_cpu = 0.0
        self.cpu_then: dict[int, float] = {}   # pid -> its CPU seconds when the one-device run ended
        self.quiet_since: dict[int, tuple[float, float]] = {}   # pid -> (CPU seconds, when) its quiet spell began

    def hung(self, now: float, used: dict[int, float]) -> bool:
        singles = [run for run in self.runs if run.world == 1]
        if self.single_ended is None:
            if not all(run.done for run in singles):
                return False
            self.single_ended = now
            self.single_cpu = max((used.get(run.process.pid, 0.0) for run in singles if run.process is not None),
                                  default=0.0)
        ranks = [run for run in self.runs if run.world > 1 and not run.done and run.process is not None]
        if not ranks:
            return False
        window = max(_HANG_IDLE_S, 2.0 * (self.single_ended - self.started))
        blocked = True
        for run in ranks:
            pid, cpu = run.process.pid, used.get(run.process.pid, 0.0)
            since = cpu - self.cpu_then.setdefault(pid, cpu)
            if since > _SPIN_FACTOR * self.single_cpu + _SPIN_CPU_S:   # spinning, not computing
                continue
            began_cpu, began = self.quiet_since.setdefault(pid, (cpu, now))
            if cpu - began_cpu > _IDLE_RATE * (now - began) + _IDLE_SLACK_S:   # it computed: a new spell
                self.quiet_since[pid] = (cpu, now)
                blocked = False
            elif now - max(began, self.single_ended) < window:
                blocked = False
        return blocked


# --- one run -------------------------------------------------------------------------------------------

def run_one() -> int:
    from frontends.traced.message import pack, unpack

    from frontends import sandbox
    from frontends.traced.child import _user_line as user_line   # the line of the user's file that raised

    out = sandbox.result_channel()
    meta, arrays = unpack(sys.stdin.buffer.read())

    with contextlib.suppress(Exception):
        sandbox.enter_child(memory_bytes=None)   # no network but loopback for the user's code
    from frontends.traced.location import locate

    paths = tuple(meta.get("paths", ()))
    sys.path[0:0] = [locate(meta["path"], paths).root, *paths]   # a package's file: from its import root
    from frontends.traced.harness_file import HarnessError
    from frontends.traced.harness_guard import HarnessRefused

    try:
        answer, values = _run(meta, arrays)
    except (_HarnessError, HarnessError, HarnessRefused) as error:   # not the user's code: nothing confirmed
        answer, values = {"status": "harness", "error": str(error)}, {}
    except BaseException as error:  # the user's code (or torch under it) raised: that is the answer
        answer, values = {"status": "raised", "error": f"{type(error).__name__}: {error}"[:2000],
                          "line": user_line(error, meta["path"])}, {}
    if out is not None:
        out.write(pack(answer, values))
    return 0


class _HarnessError(Exception):
    """The counterexample cannot be put into the run (ours, not the user's code failing)."""


def _run(meta: dict, arrays: dict):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from frontends.traced.message import numbers

    from frontends.traced import run as traced
    from frontends.traced.entries import example_inputs, find_entry
    from frontends.traced.sizes import apply_sizes
    from frontends.traced.spans import SpanFinder

    torch.set_num_threads(1)
    if meta.get("float64"):   # the second run of a finding float32's rounding may hide (confirm.py)
        torch.set_default_dtype(torch.float64)
    path, world, rank = meta["path"], int(meta["world"]), int(meta["rank"])
    traced.map_cuda_to_cpu()
    timeout = timedelta(seconds=float(meta["gloo_timeout"]))
    store = dist.HashStore() if world == 1 else \
        dist.TCPStore("127.0.0.1", int(meta["port"]), world, is_master=rank == 0, timeout=timeout)
    dist.init_process_group("gloo", rank=rank, world_size=world, store=store, timeout=timeout)
    _subgroups_on_gloo()
    if meta.get("late_async") and world > 1:   # a race's confirmation: async collectives complete at their wait
        from frontends.traced.late_completion import complete_at_wait

        complete_at_wait()
    torch.manual_seed(int(meta["seed"]))
    spans = SpanFinder(path, meta["shown_as"])
    draws = _draws(spans, arrays)
    given: list[str] = []
    if meta["entry"] is None and traced.is_launch_script(path):
        values = _launch_script(traced, path, world, rank, draws)
        return {"status": "ok", "given": sorted(set(given + draws.given)), "own": []}, values
    module = traced.import_fresh(path, tuple(meta.get("paths", ())))
    apply_sizes(module, meta["sizes"])
    guard = None
    if meta.get("harness"):   # built by the same harness as the recorded runs, held by the same guard
        from frontends.traced.harness_file import build

        traced.set_up_parallel_state(module, world)
        _, fn, names, inputs, guard = build(module, meta["harness"], world, meta["entry"])
        target, call_fn = fn, (fn.forward if isinstance(fn, torch.nn.Module) else fn)
    else:
        spec = find_entry(module, meta["entry"])
        from frontends.traced.entries import forward_arguments, parse_arg

        stated = dict(parse_arg(text) for text in meta.get("args", ()))
        target, _ = traced._construct(module, spec, world, {k: tuple(v) for k, v in meta["shapes"].items()}, stated)
        fn = target
        call_fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
        names, inputs = example_inputs(module, call_fn, {k: tuple(v) for k, v in meta["shapes"].items()},
                                       forward_arguments(module, spec, stated), world)
    spans.fallback = traced._definition_line(call_fn, module)
    forward_only = bool(meta.get("forward_only"))   # a finding on an output: inputs not trainable, see confirm.py
    tensors, inputs_by_name, as_made = [], {}, set()
    for name, value in zip(names, inputs):
        if not isinstance(value, torch.Tensor):
            tensors.append(value)
            continue
        if meta.get("inputs_as_made") and value.requires_grad:   # handed over as the traced runs did
            as_made.add(len(tensors))
        # a rank given a block of this input (--expect x=Shard(d)) gets the piece the verifier cut
        key = f"{name}@local" if world > 1 and f"{name}@local" in arrays else name
        tensor = _given(arrays, key, value if key == name else torch.as_tensor(arrays[key]).to(value.dtype), given).detach().clone()
        # an output's finding runs with inputs not trainable, unless the code made one trainable itself
        # (an entry taking gradients of its own input with torch.autograd.grad needs it)
        if tensor.is_floating_point() and (not forward_only or value.requires_grad):
            tensor.requires_grad_(True)
        tensors.append(tensor)
        inputs_by_name[name] = tensor
    own, parameters = {}, {}
    for prefix, mod in traced._modules_of(target):
        for pname, param in mod.named_parameters():
            full = prefix + pname
            local = traced._local(param)
            key = full if world == 1 else f"{full}@local"
            own[f"own:{key}"] = numbers(local)
            if key in arrays:
                with torch.no_grad():
                    local.copy_(_given(arrays, key, local, given))
            parameters[full] = param
    if meta.get("collectives"):   # replay.py: this rank's collectives of the forward pass, logged in order
        from frontends.traced.replay import log_mode

        log = log_mode()
        with guard.watch() if guard is not None else contextlib.nullcontext(), log:
            fn(*traced._as_activations(tensors, frozenset(as_made)))
        logged, values = log.as_message()
        return {"status": "ok", **logged}, values
    values: dict = {}
    ones = meta.get("cotangents") == "ones"   # confirm.confirm_raise: the backward of every output, as traced
    with draws, guard.watch() if guard is not None else contextlib.nullcontext():
        out = fn(*traced._as_activations(tensors, frozenset(as_made)))
        terms = []
        for index, (where, tensor) in enumerate(traced._flatten(out)):
            values[f"output {index}{where}"] = numbers(traced._local(tensor))
            cotangent = f"cotangent{index}" if world == 1 else f"cotangent{index}@local"
            if (cotangent in arrays or ones) and tensor.is_floating_point() and tensor.requires_grad \
                    and not forward_only:
                whole = tensor.full_tensor() if _is_dtensor(tensor) else tensor
                weight = torch.as_tensor(arrays[cotangent]).to(whole.dtype) if cotangent in arrays else \
                    torch.ones_like(whole)
                terms.append((whole * weight).sum())
        if terms:
            loss = terms[0]
            for term in terms[1:]:
                loss = loss + term
            loss.backward()
            traced._finalize_megatron_grads(fn, [])
    for name, tensor in [*inputs_by_name.items(), *parameters.items()]:
        if tensor.grad is not None:
            values[f"gradient of {name}"] = numbers(_whole_grad(traced, tensor.grad))
    return {"status": "ok", "given": sorted(set(given + draws.given)), "own": sorted(own)}, {**values, **own}


def _launch_script(traced, path: str, world: int, rank: int, draws) -> dict:
    """As ``torchrun`` would: module-level code on this rank; the state it leaves is compared."""
    import torch
    import torch.distributed as dist

    from frontends.traced.message import numbers

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                       "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    dist.init_process_group = lambda *args, **kwargs: None      # the group is already set up
    dist.destroy_process_group = lambda *args, **kwargs: None
    with draws:
        module = traced.import_fresh(path)
    values = {}
    for holder, obj in vars(module).items():
        model = getattr(obj, "module", obj) if isinstance(obj, torch.nn.Module) else None
        if not isinstance(model, torch.nn.Module):
            continue
        for pname, param in model.named_parameters():
            full = f"{holder}.{pname}"
            values[f"parameter {full} after the script"] = numbers(traced._local(param))
            if param.grad is not None:
                values[f"gradient of {full} after the script"] = numbers(_whole_grad(traced, param.grad))
    return values


def _subgroups_on_gloo() -> None:
    """Subgroups asking for NCCL (Megatron, FSDP) get the world's backend, gloo."""
    import torch.distributed as dist

    real = dist.distributed_c10d.new_group

    def new_group(*args, **kwargs):
        kwargs.pop("backend", None)
        kwargs.pop("pg_options", None)
        return real(*args, **kwargs)

    dist.new_group = dist.distributed_c10d.new_group = new_group


def _given(arrays: dict, name: str, like, given: list[str]):
    """The counterexample's value for leaf ``name`` as a tensor like ``like`` (``like`` when none)."""
    import torch

    value = arrays.get(name)
    if value is None:
        return like
    if tuple(value.shape) != tuple(like.shape):
        raise _HarnessError(f"the counterexample gives {name} shape {tuple(value.shape)}, the code builds "
                           f"{tuple(like.shape)}")
    given.append(name)
    return torch.as_tensor(value).to(like.dtype)


def _is_dtensor(tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def _whole_grad(traced, grad):
    """A DTensor gradient holding partial sums is summed over the mesh (what ``full_tensor`` does)."""
    if _is_dtensor(grad) and any(p.is_partial() for p in grad.placements):
        from torch.distributed.tensor import Replicate

        grad = grad.redistribute(grad.device_mesh, [Replicate() if p.is_partial() else p for p in grad.placements])
    return traced._local(grad)


def _draws_mode():
    from torch.utils._python_dispatch import TorchDispatchMode

    from frontends.traced.recorder import RANDOM_FACTORIES, is_traceable_wrapper_subclass_type

    class Draws(TorchDispatchMode):
        """Random draws take the counterexample's numbers, named as the recorder names them."""

        def __init__(self, spans, arrays: dict) -> None:
            super().__init__()
            self.spans, self.arrays = spans, arrays
            self.counts: dict = {}
            self.given: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            import torch

            kwargs = kwargs or {}
            if any(t is not torch.Tensor and is_traceable_wrapper_subclass_type(t) for t in types):
                return NotImplemented
            out = func(*args, **kwargs)
            if str(func) in RANDOM_FACTORIES and isinstance(out, torch.Tensor):
                line = self.spans.span().line
                count = self.counts.get(line, 0)
                self.counts[line] = count + 1
                name = f"random_L{line}_{count}"
                value = self.arrays.get(name)
                if value is not None and tuple(value.shape) == tuple(out.shape):
                    with torch.no_grad():
                        out.copy_(torch.as_tensor(value).to(out.dtype))
                    self.given.append(name)
            return out

    return Draws


class _NoDraws(contextlib.nullcontext):
    """No random draw given: the code runs under no dispatch mode at all."""

    given: list = []


def _draws(spans, arrays):
    """The mode giving random draws their values, entered only when the counterexample names one:
    under any ``TorchDispatchMode`` the ops a collective issues itself run below autograd (gloo's
    all-reduce with ``op=AVG`` divides by the world, and that division leaves the gradient), so a run
    under the mode can agree with one device where the plain code does not."""
    if not any(name.startswith("random_L") for name in arrays):
        return _NoDraws()
    return _draws_mode()(spans, arrays)


def _bootstrap() -> None:
    """Make ``frontends.traced`` importable without running ``frontends/__init__.py``."""
    import types
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path[0:1] = [str(root)]   # replace this script's own directory
    if "frontends" not in sys.modules:
        package = types.ModuleType("frontends")
        package.__path__ = [str(root / "frontends")]
        sys.modules["frontends"] = package


if __name__ == "__main__":
    _bootstrap()
    code = run_one() if sys.argv[1:] == ["run"] else supervise()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # skip interpreter teardown (seconds with torch loaded); answers are written
