"""Ground-truth executor: run a sample program for real on 1 rank and on N ranks and compare.

A sample program follows the conventions of the sample cases:

* ``example_inputs()`` returns the *global* inputs (a tensor or a tuple of tensors);
* the entry is one of
  - ``forward(*inputs)``: plain SPMD code over ``torch.distributed``; every rank gets the
    same global inputs and must return the global output;
  - ``build(mesh)``: returns the parallelised callable (DTensor style) taking the global
    inputs and returning the gathered global output; ``mesh`` is ``init_device_mesh("cpu", (N,))``;
  - an ``nn.Module`` class (Megatron style) constructed without arguments.  Its inputs are
    replicated on every rank and so is its output.  Parameters get seeded *global* values;
    a parameter whose local shape is the global shape divided by N along one dimension gets
    the contiguous block ``rank`` of that dimension (Megatron's stride-1 partitioning); the
    global shapes are found by constructing the module once more while the process pretends
    to be rank 0 of 1 (``dist.get_world_size``/``get_rank`` and Megatron's
    ``set_tensor_model_parallel_world_size/rank`` overrides).

The 1-rank run is the reference (the same program on a world of size 1, which is what the
verifier proves equivalence against).  Each run happens in processes started with
``torch.multiprocessing`` (``worker_context``: forked from one server that imported torch once)
that talk gloo over 127.0.0.1.  Several programs share one group
of processes (a fresh process group per program over one TCP store); a program that
hangs is stopped by a timeout (the processes are killed, the verdict is
``deadlock/timeout``) and the group restarts with the remaining programs.

Gradient mode runs ``backward`` of ``sum(output * cotangent)`` with a fixed seeded
cotangent and compares gradients:

* parameters sharded by the code (Megatron partitioning): the rank pieces are concatenated
  along the partition dimension; DTensor parameters: ``grad.full_tensor()``; parameters with
  the same shape on every rank must have the reference gradient on every rank;
* inputs (every rank received the whole global input): if all ranks hold the same gradient
  it is compared as is (a replicated consumer such as Megatron's ``f`` operator must
  all-reduce it); if the rank gradients have disjoint supports (each rank consumed its own
  shard, e.g. ``x.chunk(world)[rank]``) their sum is compared; otherwise every rank's
  gradient is compared to the reference (a partial gradient left unreduced fails here).
  Parameters marked ``sequence_parallel`` (Megatron) get their gradients all-reduced over
  the tensor-parallel group first, as Megatron's gradient finalisation does.
  Raw ``torch.distributed`` collectives are invisible to autograd (an all-reduce
  back-propagates as the identity), so gradient mode is meaningful for code whose
  communication is autograd-aware: custom ``torch.autograd.Function``, Megatron mappings,
  DTensor.  Inputs ``example_inputs()`` writes with ``requires_grad=False`` stay untrained (a
  forward-only file states so); when nothing is left to differentiate, gradient mode says so.

Megatron-core is replaced by the test-only shim in ``shim/`` (put on ``sys.path`` in the
worker processes only) unless ``use_shim=False``.

Integer inputs (token ids) built with ``torch.zeros(..., dtype=torch.long)`` are replaced
by seeded random ids in ``[0, VOCAB)`` when the file defines a module constant ``VOCAB``.

Command line: ``python tests/groundtruth/runner.py FILE [--world 2] [--grad]``.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import gc
import importlib.util
import inspect
import math
import os
import queue as queue_mod
import socket
import sys
import time
import traceback
import zlib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np

SHIM_DIR = str(Path(__file__).resolve().parent / "shim")

STATUS_MATCH = "match"
STATUS_MISMATCH = "mismatch"
STATUS_ERROR = "error"
STATUS_TIMEOUT = "deadlock/timeout"
STATUS_NOT_RUNNABLE = "not runnable"

DEFAULT_TIMEOUT = 60.0
_TOLERANCE = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5)}  # (rtol, atol)
_PEER_ERROR_GRACE = 5.0
_STARTUP_TIMEOUT = 180.0
_MAX_RESTARTS = 50
_WALL_FACTOR, _WALL_FLOOR = 20, 600.0  # the outer bound on a job's wall time: timeout x 20, at least 10 min
_SAMPLE_EVERY = 0.2  # seconds between looks at the workers (CPU time, state)
_GLOO_TIMEOUT = timedelta(minutes=30)  # gloo's own wall-clock limit: only a backstop, the parent judges hangs


@dataclass
class OutputDetail:
    """Comparison of one output (``out[i]``) or gradient (``grad[...]``)."""

    name: str
    matches: bool
    max_abs_diff: float
    ref_shape: tuple | None
    rank_shapes: list
    note: str = ""


@dataclass
class GroundTruthResult:
    path: str
    world: int
    mode: str  # "forward" | "grad"
    entry: str | None
    runnable: bool
    matches: bool
    status: str  # match | mismatch | error | deadlock/timeout | not runnable
    max_abs_diff: float
    details: list[OutputDetail] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    def summary(self) -> str:
        diff = "" if math.isnan(self.max_abs_diff) else f" max|diff|={self.max_abs_diff:.3g}"
        return f"{Path(self.path).name} world={self.world} {self.mode}: {self.status}{diff}"


@dataclass(frozen=True)
class JobSpec:
    path: str
    mode: str = "forward"
    entry: str | None = None
    seed: int = 0
    dtype: str = "float64"
    timeout: float = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class Job:
    """One comparison: ``spec`` on 1 rank against ``spec`` on ``world`` ranks."""

    spec: JobSpec
    world: int = 2


# ----------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------

def run_file(path, world: int = 2, mode: str = "forward", *, entry: str | None = None, seed: int = 0,
             dtype: str = "float64", timeout: float = DEFAULT_TIMEOUT, use_shim: bool = True) -> GroundTruthResult:
    """Run ``path`` on 1 rank and on ``world`` ranks and compare the results."""
    spec = JobSpec(str(Path(path).resolve()), mode, entry, seed, dtype, timeout)
    return run_jobs([Job(spec, world)], use_shim=use_shim)[0]


def run_jobs(jobs: list[Job], *, use_shim: bool = True) -> list[GroundTruthResult]:
    """Run many comparisons, sharing worker processes: one group for all 1-rank reference
    runs and one group per world size, all running concurrently."""
    ctx = worker_context()
    refs = sorted({j.spec for j in jobs}, key=lambda s: (s.path, s.mode, str(s.entry), s.seed, s.dtype))
    groups = {1: _Group(ctx, 1, refs, use_shim)}
    for world in sorted({j.world for j in jobs}):
        specs = sorted({j.spec for j in jobs if j.world == world},
                       key=lambda s: (s.path, s.mode, str(s.entry), s.seed, s.dtype))
        if world == 1:
            continue
        groups[world] = _Group(ctx, world, specs, use_shim)
    for g in groups.values():
        g.start()
    try:
        while not all(g.finished for g in groups.values()):
            progressed = False
            for g in groups.values():
                progressed |= g.poll()
            if not progressed:
                time.sleep(0.02)
    finally:
        for g in groups.values():
            g.shutdown()

    results = []
    for job in jobs:
        ref = groups[1].outcome[job.spec]
        par = groups[job.world].outcome[job.spec]
        results.append(_compare(job, ref, par))
    return results


# ----------------------------------------------------------------------------------------
# Parent side: process groups with timeouts and restarts
# ----------------------------------------------------------------------------------------

_SERVER_PRELOAD = ["torch", "torch.distributed", "numpy"]
_server_stop_registered = False


def worker_context():
    """Where the workers of both runners start: ``forkserver``, whose one server process imports
    torch once (``_SERVER_PRELOAD``) and forks every worker from that image, instead of ``spawn``,
    where each worker starts Python and imports torch again (about 2 CPU seconds a worker, more than
    a small program's run).  A worker still gets the parent's ``sys.path``, working directory and
    ``__main__`` as a spawned one does; the server runs no program, touches no tensor and starts no
    process group, so every worker starts from the same clean image.  A worker's environment variables
    are the parent's when the server started (with the first worker): the runners change none.  The
    server lives as long as this process and is stopped, and waited for, at its exit (its workers'
    CPU time is then counted among this process's children's)."""
    import torch.multiprocessing as tmp

    global _server_stop_registered
    ctx = tmp.get_context("forkserver")
    if not _server_stop_registered:
        ctx.set_forkserver_preload(_SERVER_PRELOAD)
        atexit.register(_stop_server)
        _server_stop_registered = True
    return ctx


def _stop_server():
    import multiprocessing.forkserver as forkserver

    with contextlib.suppress(Exception):
        forkserver._forkserver._stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _importable_in_children():
    """Spawned children import this module by its name with the parent's ``sys.path``
    (captured when a process starts): make sure the directory it is importable from is on it."""
    root = None
    if __name__ not in ("__main__", "__mp_main__"):
        root = str(Path(__file__).resolve().parents[len(__name__.split(".")) - 1])
    added = root is not None and root not in sys.path
    if added:
        sys.path.append(root)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(root)


@dataclass
class _Outcome:
    """What one group of ranks did with one program."""

    payloads: dict = field(default_factory=dict)  # rank -> payload
    errors: dict = field(default_factory=dict)  # rank -> traceback text
    timed_out: bool = False
    stuck_ranks: list = field(default_factory=list)
    seconds: float = 0.0


class _Group:
    def __init__(self, ctx, world: int, specs: list[JobSpec], use_shim: bool):
        self.ctx = ctx
        self.world = world
        self.specs = list(specs)
        self.use_shim = use_shim
        self.outcome: dict[JobSpec, _Outcome] = {}
        self.pending: list[int] = list(range(len(self.specs)))
        self.procs: list = []
        self.queue = None
        self.restarts = 0
        self.finished = not self.specs

    # -- life cycle --------------------------------------------------------------------
    def start(self):
        if self.finished:
            return
        self.queue = self.ctx.Queue()
        port = _free_port() if self.world > 1 else 0
        jobs = [(i, dataclasses.asdict(self.specs[i])) for i in self.pending]
        self.procs = []
        with _importable_in_children():
            for rank in range(self.world):
                p = self.ctx.Process(target=_worker, args=(rank, self.world, port, jobs, self.queue, self.use_shim),
                                     daemon=True)
                p.start()
                self.procs.append(p)
        self._watch_from_now()

    def _watch_from_now(self):
        """The workers just started: no job running, none seen working yet."""
        self.started_at = time.monotonic()
        self.job_started: dict[int, float] = {}
        self.current: dict[int, int | None] = {r: None for r in range(self.world)}
        self.partial: dict[int, _Outcome] = {}
        self.first_error_at: dict[int, float] = {}
        self.exited: set[int] = set()
        self.progress_at = time.monotonic()
        self.sampled_at = 0.0
        self.cpu_now: list[float] = [0.0] * len(self.procs)
        self.job_cpu: dict[int, list[float]] = {}

    def _sample(self, now: float):
        """Whether the workers still make progress, judged by their processes, not the clock: on
        a busy machine a job runs slower but a rank's main thread stays runnable (waiting for a
        core); a hang leaves every rank asleep, waiting for a message that never comes."""
        if now - self.sampled_at < _SAMPLE_EVERY:
            return
        from frontends.sandbox import cpu_seconds_of, is_runnable  # the parent's only: workers never import it

        self.sampled_at = now
        self.cpu_now = [cpu_seconds_of(p.pid) for p in self.procs]
        if any(is_runnable(p.pid) for p in self.procs):
            self.progress_at = now

    def _stuck(self, idx: int, timeout: float, started: float, now: float) -> bool:
        """No rank of the job was seen working for ``timeout`` seconds (a hang), or one used
        ``timeout`` CPU seconds on it (a loop), or the wall clock's outer bound passed.  Where
        ``/proc`` cannot tell, no rank is ever seen working: the first rule is the wall time
        since the job started."""
        before = self.job_cpu.get(idx, self.cpu_now)
        used = max((cur - old for cur, old in zip(self.cpu_now, before)), default=0.0)
        return now - max(started, self.progress_at) > timeout or used > timeout or \
            now - started > max(_WALL_FACTOR * timeout, _WALL_FLOOR)

    def _kill(self):
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(timeout=10)
        if self.queue is not None:
            self.queue.close()
            self.queue.cancel_join_thread()
        self.procs = []

    def shutdown(self):
        for p in self.procs:
            p.join(timeout=5)
        self._kill()

    def _restart_after(self, idx: int | None):
        self._kill()
        self.pending = [i for i in self.pending if self.specs[i] not in self.outcome]
        if idx is not None and idx in self.pending:
            self.pending.remove(idx)
        if not self.pending:
            self.finished = True
            return
        self.restarts += 1
        if self.restarts > _MAX_RESTARTS:
            for i in self.pending:
                self.outcome[self.specs[i]] = _Outcome(errors={0: "ground-truth runner gave up (too many restarts)"})
            self.finished = True
            return
        self.start()

    # -- message pump ------------------------------------------------------------------
    def poll(self) -> bool:
        if self.finished:
            return False
        progressed = False
        while True:
            try:
                msg = self.queue.get_nowait()
            except (queue_mod.Empty, OSError, EOFError, ValueError):
                break
            progressed = True
            self._handle(msg)
            if self.finished:
                return True
        self._check_health()
        return progressed

    def _handle(self, msg):
        kind, rank = msg[0], msg[1]
        now = time.monotonic()
        self.progress_at = now
        if kind == "start":
            idx = msg[2]
            self.current[rank] = idx
            self.job_started.setdefault(idx, now)
            if idx not in self.job_cpu:
                self.sampled_at = 0.0
                self._sample(now)
                self.job_cpu[idx] = self.cpu_now
            self.partial.setdefault(idx, _Outcome())
        elif kind in ("done", "error"):
            idx = msg[2]
            out = self.partial.setdefault(idx, _Outcome())
            if kind == "done":
                out.payloads[rank] = msg[3]
            else:
                out.errors[rank] = msg[3]
                self.first_error_at.setdefault(idx, now)
            self.current[rank] = None
            if len(out.payloads) + len(out.errors) == self.world:
                out.seconds = now - self.job_started.get(idx, now)
                self.outcome[self.specs[idx]] = out
                if out.errors:
                    # A failed program may leave peers out of step: start afresh.
                    self._restart_after(idx)
        elif kind == "fatal":
            if "EADDRINUSE" in str(msg[2]) and self.restarts < _MAX_RESTARTS:
                # the free port was taken before rank 0 bound it (another process): again, on a new port
                self.restarts += 1
                self._kill()
                self.start()
                return
            self._fatal(f"worker rank {rank} failed to start:\n{msg[2]}")
        elif kind == "exit":
            self.exited.add(rank)
            if len(self.exited) == self.world:
                missing = [i for i in self.pending if self.specs[i] not in self.outcome]
                for i in missing:
                    self.outcome[self.specs[i]] = _Outcome(errors={0: "worker exited without reporting"})
                self.finished = True
                for p in self.procs:
                    p.join(timeout=10)

    def _fatal(self, text: str):
        self._kill()
        for i in self.pending:
            if self.specs[i] not in self.outcome:
                self.outcome[self.specs[i]] = _Outcome(errors={0: text})
        self.finished = True

    def _check_health(self):
        if self.finished:
            return
        now = time.monotonic()
        self._sample(now)
        running = {idx for idx in self.current.values() if idx is not None}
        running |= {idx for idx in self.partial if self.specs[idx] not in self.outcome}
        for idx in sorted(running):
            spec = self.specs[idx]
            started = self.job_started.get(idx)
            out = self.partial[idx]
            if idx in self.first_error_at and now - self.first_error_at[idx] > _PEER_ERROR_GRACE:
                for r in range(self.world):
                    if r not in out.payloads and r not in out.errors:
                        out.errors[r] = "did not finish after a peer failed (stopped)"
                out.seconds = now - (started or now)
                self.outcome[spec] = out
                self._restart_after(idx)
                return
            if started is not None and self._stuck(idx, spec.timeout, started, now):
                out.timed_out = True
                out.stuck_ranks = [r for r in range(self.world) if r not in out.payloads and r not in out.errors]
                out.seconds = now - started
                self.outcome[spec] = out
                self._restart_after(idx)
                return
        if not self.job_started and now - self.started_at > _STARTUP_TIMEOUT:
            self._fatal("workers did not start in time")
            return
        for rank, p in enumerate(self.procs):
            if not p.is_alive() and p.exitcode not in (0, None) and rank not in self.exited:
                if not self.job_started:
                    self._fatal(f"worker rank {rank} died during start-up (exit code {p.exitcode}); "
                                "the parent's __main__ must be importable by spawned processes")
                    return
                idx = self.current.get(rank)
                if idx is None:
                    idx = next((i for i in self.pending if self.specs[i] not in self.outcome), None)
                if idx is None:
                    self._fatal(f"worker rank {rank} died (exit code {p.exitcode})")
                    return
                out = self.partial.setdefault(idx, _Outcome())
                out.errors[rank] = f"worker process died (exit code {p.exitcode})"
                self.outcome[self.specs[idx]] = out
                self._restart_after(idx)
                return


# ----------------------------------------------------------------------------------------
# Worker side
# ----------------------------------------------------------------------------------------

def _worker(rank: int, world: int, port: int, jobs: list, queue, use_shim: bool):
    try:
        import warnings
        from datetime import timedelta

        warnings.simplefilter("ignore")
        if use_shim and SHIM_DIR not in sys.path:
            sys.path.insert(0, SHIM_DIR)
        with contextlib.suppress(Exception):
            if "lo" in {name for _, name in socket.if_nameindex()}:
                os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        if world == 1:
            store = dist.HashStore()
        else:
            store = dist.TCPStore("127.0.0.1", port, world, is_master=(rank == 0), timeout=timedelta(seconds=120))
    except BaseException:
        queue.put(("fatal", rank, traceback.format_exc()))
        return
    for idx, spec_dict in jobs:
        spec = JobSpec(**spec_dict)
        queue.put(("start", rank, idx))
        try:
            payload = _execute(spec, rank, world, store, idx)
        except BaseException:
            queue.put(("error", rank, idx, _short_tb()))
        else:
            queue.put(("done", rank, idx, payload))
    queue.put(("exit", rank))
    queue.close()
    queue.join_thread()


def _short_tb() -> str:
    text = traceback.format_exc()
    return text if len(text) < 6000 else text[:1500] + "\n...\n" + text[-4000:]


def poison_uninitialized_memory() -> None:
    """Fresh tensors (``torch.empty``, ``empty_like``, ``new_empty``) hold NaN, integers their largest
    value, instead of whatever the allocator hands back: ranks forked from one parent get the same stale
    blocks as the single-device run, so a program returning memory nothing wrote (an ``all_gather``
    dropped into ``empty_like`` buffers) compared equal. ``_diff`` counts a NaN as differing."""
    import torch
    import torch.utils.deterministic

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True


def _execute(spec: JobSpec, rank: int, world: int, store, idx: int) -> dict:
    import torch
    import torch.distributed as dist

    poison_uninitialized_memory()
    dtype = getattr(torch, spec.dtype)
    old_dtype = torch.get_default_dtype()
    name = f"_groundtruth_program_{idx}"
    dist.init_process_group("gloo", store=dist.PrefixStore(f"job{idx}", store), rank=rank, world_size=world,
                            timeout=_GLOO_TIMEOUT)
    _autograd_collectives_on_this_group()
    megatron_ps = None
    try:
        torch.set_default_dtype(dtype)
        module = _import_file(spec.path, name)
        kind, obj = _resolve_entry(module, spec.entry)
        if "megatron" in sys.modules:
            with contextlib.suppress(ImportError):
                from megatron.core import parallel_state as megatron_ps
            if megatron_ps is not None and not megatron_ps.model_parallel_is_initialized():
                megatron_ps.initialize_model_parallel(tensor_model_parallel_size=world)
        torch.manual_seed(spec.seed)
        inputs = _global_inputs(module, spec, dtype)

        grad_mode = spec.mode == "grad"
        params: list = []  # (name, tensor, shard_dim or "dtensor" or None)
        if kind == "build":
            from torch.distributed.device_mesh import init_device_mesh

            mesh = init_device_mesh("cpu", (world,))
            torch.manual_seed(spec.seed + 1)
            fn = obj(mesh)
            for prefix, mod in _modules_reachable_from(fn):
                for pname, p in mod.named_parameters():
                    params.append((prefix + pname, p, "dtensor" if _is_dtensor(p) else None))
        elif kind == "module":
            fn, shard_dims = _build_module(obj, world, rank, spec.seed, dtype, megatron_ps)
            params = [(n, p, shard_dims[n]) for n, p in fn.named_parameters()]
        else:
            fn = obj

        frozen = _stated_not_trainable(module) if grad_mode else set()
        leaves = []
        for i, t in enumerate(inputs):
            if isinstance(t, torch.Tensor) and t.is_floating_point() and grad_mode and i not in frozen:
                t = t.detach().clone().requires_grad_(True)
            leaves.append(t)
        if grad_mode:
            out = fn(*leaves)
        else:
            with torch.no_grad():
                out = fn(*leaves)
        flat = list(_flatten(out))
        payload = {"outputs": [(f"out{path}", _to_numpy(t)) for path, t in flat], "grads": []}
        if grad_mode:
            loss = None
            for i, (_, t) in enumerate(flat):
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad:
                    t = _full(t)
                    gen = torch.Generator().manual_seed(spec.seed * 7919 + 104729 + i)
                    cot = torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)
                    term = (t * cot).sum()
                    loss = term if loss is None else loss + term
            if loss is None:
                raise RuntimeError("gradient mode: no output depends on the inputs through autograd")
            loss.backward()
            if kind == "module" and world > 1:
                _finalize_sequence_parallel_grads(params, megatron_ps)
            for i, t in enumerate(leaves):
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    g = t.grad if t.grad is not None else torch.zeros_like(t)
                    payload["grads"].append((f"grad[input {i}]", "input", None, _to_numpy(g)))
            for pname, p, shard in params:
                g = p.grad
                if g is None:
                    g = torch.zeros(p.shape, dtype=p.dtype) if not _is_dtensor(p) else None
                elif _is_dtensor(g):
                    g = g.full_tensor()
                payload["grads"].append((f"grad[param {pname}]", "param", shard,
                                         None if g is None else _to_numpy(g)))
        return payload
    finally:
        torch.set_default_dtype(old_dtype)
        sys.modules.pop(name, None)
        if megatron_ps is not None:
            with contextlib.suppress(Exception):
                megatron_ps.destroy_model_parallel()
        # the program's objects (a DDP reducer holds the group and its pending work) go before the
        # group does: destroyed after it, a DDP reducer could block one rank in C++ for ever
        fn = params = leaves = out = flat = module = obj = loss = inputs = None
        gc.collect()
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _autograd_collectives_on_this_group():
    """``torch.distributed.nn.functional`` evaluates its ``group=group.WORLD`` defaults when first
    imported: in a worker running several programs, the group of an earlier program (destroyed).
    ``None`` is the current default group to every c10d call they make."""
    import torch.distributed as dist
    import torch.distributed.nn.functional as autograd_collectives

    for function in vars(autograd_collectives).values():
        defaults = getattr(function, "__defaults__", None)
        if callable(function) and defaults and any(isinstance(d, dist.ProcessGroup) for d in defaults):
            function.__defaults__ = tuple(None if isinstance(d, dist.ProcessGroup) else d for d in defaults)


def _finalize_sequence_parallel_grads(params, megatron_ps):
    """Megatron's gradient finalisation all-reduces, over the tensor-parallel group, the
    gradients of parameters marked ``sequence_parallel`` (LayerNorm weights and biases
    applied to sequence shards): each rank only saw its own tokens."""
    import torch.distributed as dist

    group = megatron_ps.get_tensor_model_parallel_group() if megatron_ps is not None else None
    for _, p, _ in params:
        if getattr(p, "sequence_parallel", False) and p.grad is not None:
            dist.all_reduce(p.grad, group=group)


def _import_file(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _resolve_entry(module, entry: str | None):
    import torch.nn as nn

    def kind_of(obj, name):
        if inspect.isclass(obj) and issubclass(obj, nn.Module):
            return "module"
        if name == "build":
            return "build"
        return "forward"

    if entry:
        obj = getattr(module, entry)
        return kind_of(obj, entry), obj
    for name in ("build", "forward"):
        obj = getattr(module, name, None)
        if inspect.isfunction(obj):
            return name, obj
    classes = [v for v in vars(module).values()
               if inspect.isclass(v) and issubclass(v, nn.Module) and v.__module__ == module.__name__]
    if classes:
        def used_by_others(c):
            for other in classes:
                if other is not c:
                    with contextlib.suppress(OSError, TypeError):
                        if f"{c.__name__}(" in inspect.getsource(other):
                            return True
            return False

        top = [c for c in classes if not used_by_others(c)] or classes
        top.sort(key=lambda c: inspect.getsourcelines(c)[1])
        return "module", top[-1]
    funcs = [v for k, v in vars(module).items()
             if inspect.isfunction(v) and v.__module__ == module.__name__ and k != "example_inputs"]
    if len(funcs) == 1:
        return "forward", funcs[0]
    raise LookupError("no entry: expected build(mesh), forward(...), an nn.Module class, or --entry")


def _stated_not_trainable(module) -> set[int]:
    """Positions of ``example_inputs()``'s results the file writes ``requires_grad=False`` for: gradient
    mode trains every other floating input (an entry's inputs are activations), not these.  The rule
    is the tool's own (``frontends.traced.entries``), so the judge and the tool read the same
    statement; a forward-only file (a plain ``dist.all_reduce`` carries no gradient) is then judged
    on what it claims, not rejected because its inputs were made trainable behind its back."""
    from frontends.traced.entries import explicitly_not_trainable

    return explicitly_not_trainable(module)


def _global_inputs(module, spec: JobSpec, dtype) -> list:
    import torch

    make = getattr(module, "example_inputs", None)
    if make is None:
        raise LookupError("the file has no example_inputs()")
    inputs = make()
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    vocab = getattr(module, "VOCAB", None)
    gen = torch.Generator().manual_seed(spec.seed + 17)
    out = []
    for t in inputs:
        if isinstance(t, torch.Tensor):
            if t.is_floating_point():
                t = t.to(dtype)
            elif t.dtype in (torch.int64, torch.int32) and isinstance(vocab, int):
                t = torch.randint(0, vocab, t.shape, generator=gen, dtype=t.dtype)
        out.append(t)
    return out


@contextlib.contextmanager
def _pretend_single_rank(megatron_ps):
    import torch.distributed as dist

    saved = dist.get_world_size, dist.get_rank
    dist.get_world_size = lambda group=None: 1
    dist.get_rank = lambda group=None: 0
    if megatron_ps is not None:
        megatron_ps.set_tensor_model_parallel_world_size(1)
        megatron_ps.set_tensor_model_parallel_rank(0)
    try:
        yield
    finally:
        dist.get_world_size, dist.get_rank = saved
        if megatron_ps is not None:
            megatron_ps.set_tensor_model_parallel_world_size(None)
            megatron_ps.set_tensor_model_parallel_rank(None)


def _build_module(cls, world: int, rank: int, seed: int, dtype, megatron_ps):
    import torch

    with _pretend_single_rank(megatron_ps):
        torch.manual_seed(seed)
        global_shapes = {n: tuple(p.shape) for n, p in cls().named_parameters()}
    torch.manual_seed(seed)
    module = cls().to(dtype)
    shard_dims = {}
    for pname, p in module.named_parameters():
        gshape, lshape = global_shapes[pname], tuple(p.shape)
        gen = torch.Generator().manual_seed(seed * 1000003 + zlib.crc32(pname.encode()))
        value = 0.5 * torch.randn(gshape, generator=gen, dtype=torch.float64).to(dtype)
        if gshape == lshape:
            shard_dims[pname] = None
            local = value
        else:
            dims = [d for d in range(len(gshape)) if len(gshape) == len(lshape) and gshape[d] != lshape[d]]
            if len(dims) != 1 or gshape[dims[0]] != lshape[dims[0]] * world:
                raise RuntimeError(f"parameter {pname}: local shape {lshape} is not a 1/{world} block of "
                                   f"the global shape {gshape}")
            shard_dims[pname] = dims[0]
            local = value.chunk(world, dim=dims[0])[rank]
        with torch.no_grad():
            p.copy_(local)
    return module, shard_dims


def _modules_reachable_from(fn):
    import torch.nn as nn

    found, seen = [], set()

    def add(prefix, obj):
        if isinstance(obj, nn.Module) and id(obj) not in seen:
            seen.add(id(obj))
            found.append((prefix, obj))

    add("", fn)
    add("", getattr(fn, "__self__", None))
    for cell in getattr(fn, "__closure__", None) or ():
        with contextlib.suppress(ValueError):
            add("", cell.cell_contents)
    if len(found) > 1:
        found = [(f"m{i}.", m) for i, (_, m) in enumerate(found)]
    return found


def _is_dtensor(t) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover
        return False
    return isinstance(t, DTensor)


def _full(t):
    return t.full_tensor() if _is_dtensor(t) else t


def _flatten(obj, path=""):
    if isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            yield from _flatten(v, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k in sorted(obj):
            yield from _flatten(obj[k], f"{path}[{k!r}]")
    else:
        yield (path or "", obj)


def _to_numpy(t):
    import torch

    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        t = _full(t).detach().cpu()
        if t.is_floating_point():
            t = t.to(torch.float64)
        return t.numpy().copy()
    if isinstance(t, (int, float, bool)):
        return np.asarray(t)
    return repr(t)


# ----------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------

def _diff(a, b, rtol, atol) -> tuple[bool, float]:
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        same = (a is None and b is None) or (isinstance(a, str) and a == b)
        return same, 0.0 if same else math.inf
    if a.shape != b.shape:
        return False, math.inf
    if a.size == 0:
        return True, 0.0
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        d = float(np.max(np.abs(a.astype(np.int64) - b.astype(np.int64))))
        return d == 0, d
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if np.isnan(a64).any() or np.isnan(b64).any():
        # a NaN is what a rank read from memory nothing wrote (``poison_uninitialized_memory``), or an
        # undefined value: it equals nothing, not even the other run's NaN at the same place
        return False, math.inf
    if not (np.all(np.isfinite(a64)) and np.all(np.isfinite(b64))):
        same = bool(np.array_equal(a64, b64))
        return same, 0.0 if same else math.inf
    d = float(np.max(np.abs(a64 - b64)))
    return bool(np.allclose(a64, b64, rtol=rtol, atol=atol)), d


def _shape(a):
    return tuple(a.shape) if isinstance(a, np.ndarray) else None


def _compare_each_rank(name, ref, per_rank, rtol, atol, note="") -> OutputDetail:
    worst, ok = 0.0, True
    for a in per_rank:
        same, d = _diff(a, ref, rtol, atol)
        ok &= same
        worst = max(worst, d)
    return OutputDetail(name, ok, worst, _shape(ref), [_shape(a) for a in per_rank], note)


def _compare_input_grad(name, ref, per_rank, rtol, atol) -> OutputDetail:
    shapes = [_shape(a) for a in per_rank]
    if any(a is None or a.shape != ref.shape for a in per_rank):
        return OutputDetail(name, False, math.inf, _shape(ref), shapes, "shape differs")
    if all(_diff(a, per_rank[0], rtol, atol)[0] for a in per_rank):
        same, d = _diff(per_rank[0], ref, rtol, atol)
        return OutputDetail(name, same, d, _shape(ref), shapes, "replicated gradient")
    supports = [a != 0 for a in per_rank]
    overlap = np.sum(np.stack(supports).astype(np.int64), axis=0) > 1
    if not overlap.any():
        same, d = _diff(np.sum(np.stack(per_rank), axis=0), ref, rtol, atol)
        return OutputDetail(name, same, d, _shape(ref), shapes,
                            "sharded gradient: disjoint rank pieces summed")
    detail = _compare_each_rank(name, ref, per_rank, rtol, atol)
    detail.note = "rank gradients differ and overlap: each compared to the reference (unreduced partial?)"
    return detail


def _compare_param_grad(name, shard, ref, per_rank, rtol, atol) -> OutputDetail:
    shapes = [_shape(a) for a in per_rank]
    if ref is None or any(a is None for a in per_rank):
        same = ref is None and all(a is None for a in per_rank)
        return OutputDetail(name, same, 0.0 if same else math.inf, _shape(ref), shapes, "no gradient")
    if isinstance(shard, int):
        try:
            full = np.concatenate(per_rank, axis=shard)
        except ValueError:
            return OutputDetail(name, False, math.inf, _shape(ref), shapes, "cannot reassemble")
        same, d = _diff(full, ref, rtol, atol)
        return OutputDetail(name, same, d, _shape(ref), shapes, f"rank pieces concatenated along dim {shard}")
    note = "DTensor gradient (full_tensor)" if shard == "dtensor" else "same-shape parameter: full gradient expected on every rank"
    return _compare_each_rank(name, ref, per_rank, rtol, atol, note)


_CONSEQUENTIAL = ("Connection closed by peer", "did not finish after a peer failed", "Connection reset by peer",
                  "Check the logs of the remote worker")   # gloo: a read from a peer that died


def own_failure_rank(errors: dict) -> int:
    """The rank whose error is its own failure rather than a peer's reaction to it (the first to
    arrive among those): a rank killed after a peer failed reports no exception of the program's."""
    order = list(errors)  # arrival order
    return min(order, key=lambda r: (any(m in errors[r] for m in _CONSEQUENTIAL), order.index(r)))


def _first_error(errors: dict) -> str:
    """The most telling error: a rank's own failure rather than a peer's reaction to it."""
    order = list(errors)
    rank = own_failure_rank(errors)
    text = f"rank {rank}: {errors[rank]}"
    others = [f"rank {r}: {errors[r].strip().splitlines()[-1]}" for r in order if r != rank]
    return text + ("\n" + "\n".join(others) if others else "")


def _compare(job: Job, ref: _Outcome, par: _Outcome) -> GroundTruthResult:
    spec = job.spec
    base = dict(path=spec.path, world=job.world, mode=spec.mode, entry=spec.entry)
    if ref.timed_out or ref.errors:
        err = "reference (1 rank) timed out" if ref.timed_out else "reference (1 rank) failed: " + _first_error(ref.errors)
        return GroundTruthResult(**base, runnable=False, matches=False, status=STATUS_NOT_RUNNABLE,
                                 max_abs_diff=math.nan, error=err, seconds=par.seconds)
    if par.timed_out:
        err = f"no progress after {spec.timeout:.0f}s; ranks still running: {par.stuck_ranks}"
        if par.errors:
            err += "\n" + _first_error(par.errors)
        return GroundTruthResult(**base, runnable=True, matches=False, status=STATUS_TIMEOUT,
                                 max_abs_diff=math.inf, error=err, seconds=par.seconds)
    if par.errors:
        return GroundTruthResult(**base, runnable=True, matches=False, status=STATUS_ERROR,
                                 max_abs_diff=math.inf, error=_first_error(par.errors), seconds=par.seconds)
    rtol, atol = _TOLERANCE.get(spec.dtype, _TOLERANCE["float32"])
    rp = ref.payloads[0]
    ranks = [par.payloads[r] for r in range(job.world)]
    details = []
    ref_outs = dict(rp["outputs"])
    names = [n for n, _ in rp["outputs"]]
    for r in ranks:
        names += [n for n, _ in r["outputs"] if n not in names]
    for n in names:
        per_rank = [dict(r["outputs"]).get(n) for r in ranks]
        if n not in ref_outs:
            details.append(OutputDetail(n, False, math.inf, None, [_shape(a) for a in per_rank], "not in reference"))
            continue
        details.append(_compare_each_rank(n, ref_outs[n], per_rank, rtol, atol))
    if len(names) != len(rp["outputs"]) or any(len(r["outputs"]) != len(rp["outputs"]) for r in ranks):
        details.append(OutputDetail("outputs", False, math.inf, None, [], "number of outputs differs"))
    if spec.mode == "grad":
        for gname, kind, _, gref in rp["grads"]:
            entries = [next((g for g in r["grads"] if g[0] == gname), None) for r in ranks]
            if any(e is None for e in entries):
                details.append(OutputDetail(gname, False, math.inf, _shape(gref), [], "missing on some rank"))
                continue
            per_rank = [e[3] for e in entries]
            if kind == "input":
                details.append(_compare_input_grad(gname, gref, per_rank, rtol, atol))
            else:
                details.append(_compare_param_grad(gname, entries[0][2], gref, per_rank, rtol, atol))
    matches = all(d.matches for d in details)
    worst = max((d.max_abs_diff for d in details), default=0.0)
    return GroundTruthResult(**base, runnable=True, matches=matches,
                             status=STATUS_MATCH if matches else STATUS_MISMATCH,
                             max_abs_diff=worst, details=details, seconds=par.seconds)


# ----------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--world", type=int, action="append", help="rank count (repeatable; default 2)")
    ap.add_argument("--grad", action="store_true", help="also compare gradients")
    ap.add_argument("--entry")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    ap.add_argument("--no-shim", action="store_true", help="do not use the Megatron-core shim")
    args = ap.parse_args(argv)
    worlds = args.world or [2]
    modes = ["forward", "grad"] if args.grad else ["forward"]
    jobs = [Job(JobSpec(str(Path(f).resolve()), m, args.entry, timeout=args.timeout), w)
            for f in args.files for w in worlds for m in modes]
    all_ok = True
    for res in run_jobs(jobs, use_shim=not args.no_shim):
        all_ok &= res.matches
        print(res.summary())
        for d in res.details:
            if not d.matches:
                print(f"    {d.name}: max|diff|={d.max_abs_diff:.3g} ref={d.ref_shape} ranks={d.rank_shapes} {d.note}")
        if res.error:
            print("    " + res.error.strip().replace("\n", "\n    "))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
