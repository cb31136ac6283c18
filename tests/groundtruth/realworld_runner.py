"""Ground truth for the real-world gallery (``examples/realworld/``): run each driver for real
with ``torch.distributed`` (gloo over 127.0.0.1, CPU) on 1 rank and on N ranks, and compare
outputs and gradients.  Real libraries only (megatron-core, DTensor, DDP, FSDP2): no shim.

Entry conventions (first match wins):

* ``build(mesh)`` + ``example_inputs()``: returns the parallelised callable; ``mesh`` is
  ``init_device_mesh("cpu", (N,))``;
* ``example_module()`` + ``example_inputs()``: returns the constructed module (it may read
  ``dist.get_world_size()``, initialise Megatron's ``parallel_state``, wrap in DDP ...);
* ``forward(*inputs)`` + ``example_inputs()``;
* a launch script: no ``example_inputs()``; its module-level code is the program (torchrun
  style: it reads ``RANK``/``WORLD_SIZE``, calls ``dist.init_process_group`` and
  ``init_device_mesh("cuda", ...)``); what is compared is the training state it leaves.

What a run does, the same way on the 1-rank reference and on every rank of N:

* one process group per driver (``PrefixStore`` over one ``TCPStore``), default dtype float64;
  ``cuda`` is mapped to CPU: ``init_device_mesh("cuda", ...)`` builds a CPU mesh,
  ``torch.cuda.set_device`` does nothing, ``torch.cuda.current_device()`` is the CPU (Megatron
  allocates its sequence-parallel buffers there), ``dist.init_process_group`` (any backend) keeps
  the gloo group already set up, ``dist.destroy_process_group`` is left to the runner;
* Megatron: if the file imported megatron and did not call
  ``parallel_state.initialize_model_parallel`` itself, the runner calls it with
  ``tensor_model_parallel_size=N`` before the entry runs;
* ``torch.manual_seed(seed)`` before the module is built and before ``example_inputs()``;
  the inputs' floating tensors become float64 and keep their ``requires_grad``;
* outputs are flattened (tuples, lists, dicts); DTensors are compared as ``full_tensor()``;
* backward: if some output requires grad, ``sum_i (out_i * c_i)`` with seeded cotangents
  ``c_i`` is back-propagated; otherwise the code ran its own backward (e.g. a DDP step) and
  the gradients it left are compared.  Parameters marked ``sequence_parallel`` (Megatron's
  norm weights) get their gradient all-reduced over the tensor-parallel group first, as
  Megatron's ``finalize_model_grads`` does in every training step.

**Parameter correspondence** (module and ``build`` entries).  The reference (world 1) runs
first; the values of its parameters, seeded, are sent to every rank of the N-rank run, which
copies its own piece into each parameter before the forward pass:

1. DTensor parameter: ``distribute_tensor(value, p.device_mesh, p.placements)``'s local part;
2. Megatron metadata (``tensor_model_parallel``, ``partition_dim``, ``partition_stride``):
   the value is split along ``partition_dim`` into ``N * stride`` chunks and rank ``r`` gets
   chunks ``r, r + N, ...`` (Megatron's own ``_initialize_affine_weight_cpu`` layout);
3. otherwise by shape: the same shape -> the whole value (replicated); one dim ``N`` times
   smaller -> the contiguous block ``r`` of that dim; anything else is an error.

Gradients are re-assembled the same way before they are compared (DTensor:
``full_tensor()``; Megatron: the strided chunks put back; by shape: blocks concatenated;
same shape: every rank must hold the reference gradient).  Input gradients: the same on
every rank -> compared as is; disjoint supports (each rank used its own shard) -> summed;
otherwise every rank against the reference.  Launch scripts set their own seeds: the
parameters of every module-level ``nn.Module`` (DDP's ``.module`` unwrapped), their values
after the script and their gradients, are compared; other module-level tensors (the local
batch, the local loss) are per-rank by nature and are not.

A driver that does not finish within its timeout is stopped (``deadlock/timeout``).

Command line: ``python tests/groundtruth/realworld_runner.py FILE... [--world 2 --world 4]``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import math
import os
import socket
import sys
import time
import traceback
from pathlib import Path

import numpy as np

try:
    from groundtruth import runner as base
except ImportError:  # run as a script or imported under another rootdir
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundtruth import runner as base

GroundTruthResult = base.GroundTruthResult
OutputDetail = base.OutputDetail
STATUS_MATCH, STATUS_MISMATCH = base.STATUS_MATCH, base.STATUS_MISMATCH
STATUS_ERROR, STATUS_TIMEOUT = base.STATUS_ERROR, base.STATUS_TIMEOUT
STATUS_NOT_RUNNABLE = base.STATUS_NOT_RUNNABLE

DEFAULT_TIMEOUT = 60.0


@dataclasses.dataclass(frozen=True)
class Spec:
    path: str
    seed: int = 0
    timeout: float = DEFAULT_TIMEOUT
    expect_hang: bool = False  # runs in workers of its own: a hang restarts nobody else's


@dataclasses.dataclass(frozen=True)
class Job:
    spec: Spec
    world: int = 2


def run_file(path, world: int = 2, *, seed: int = 0, timeout: float = DEFAULT_TIMEOUT) -> GroundTruthResult:
    return run_jobs([Job(Spec(str(Path(path).resolve()), seed, timeout), world)])[0]


def run_jobs(jobs: list[Job]) -> list[GroundTruthResult]:
    """One group of one process runs every 1-rank reference; one group of N processes per
    world size runs the N-rank runs, and every driver expected to hang gets a group of its
    own (started once the others are done).  The reference and the shared groups start at
    once; an N-rank run waits for the reference parameter values of its driver, which the
    parent forwards as soon as the reference has them."""
    ctx = base.worker_context()   # workers forked from one server that imported torch once
    specs = sorted({j.spec for j in jobs}, key=_order)
    ref = _Group(ctx, 1, specs)
    parallel: dict[tuple, _Group] = {}
    for world in sorted({j.world for j in jobs}):
        mine = sorted({j.spec for j in jobs if j.world == world}, key=_order)
        shared = [s for s in mine if not s.expect_hang]
        if shared:
            parallel[(world, None)] = _Group(ctx, world, shared)
        for s in mine:
            if s.expect_hang:
                parallel[(world, s)] = _Group(ctx, world, [s])
    # Two stages keep the number of processes on a small machine down: the reference and the
    # shared groups, then the drivers expected to hang.
    first = [ref] + [g for key, g in parallel.items() if key[1] is None]
    later = [g for key, g in parallel.items() if key[1] is not None]
    forwarded: set = set()
    for stage in (first, later):
        for g in stage:
            g.start()
            for s in forwarded:
                g.offer(s, ref.outcome[s].payloads.get(0, {}).get("param_values", {}))
        try:
            while not all(g.finished for g in stage):
                progressed = False
                for g in stage:
                    progressed |= g.poll()
                for s, out in list(ref.outcome.items()):
                    if s not in forwarded:
                        forwarded.add(s)
                        values = out.payloads.get(0, {}).get("param_values", {})
                        for g in parallel.values():
                            g.offer(s, values)
                if not progressed:
                    time.sleep(0.02)
        finally:
            for g in stage:
                g.shutdown()

    def outcome(job):
        key = (job.world, job.spec if job.spec.expect_hang else None)
        return parallel[key].outcome[job.spec]

    return [_compare(job, ref.outcome[job.spec], outcome(job)) for job in jobs]


def _order(spec: Spec):
    return (spec.expect_hang, spec.path, spec.seed)


class _Group(base._Group):
    """The shared runner's process group (timeouts, restarts, message pump) with this
    module's worker.  An N-rank worker reads the reference parameter values of each driver
    from its inbox before running it."""

    def __init__(self, ctx, world, specs):
        super().__init__(ctx, world, specs, use_shim=False)
        self.ref_params: dict = {}
        self.inboxes: list = []

    def offer(self, spec: Spec, values: dict):
        if spec in self.specs and spec not in self.ref_params:
            self.ref_params[spec] = values
            if not getattr(self, "job_started", True):
                self.started_at = time.monotonic()  # waiting for the reference is not start-up
            self._send(spec)

    def _send(self, spec: Spec):
        idx = self.specs.index(spec)
        for inbox in self.inboxes:
            inbox.put((idx, self.ref_params[spec]))

    def start(self):
        if self.finished:
            return
        self.queue = self.ctx.Queue()
        port = base._free_port() if self.world > 1 else 0
        jobs = [(i, dataclasses.asdict(self.specs[i])) for i in self.pending]
        self.inboxes = [self.ctx.Queue() for _ in range(self.world)] if self.world > 1 else []
        self.procs = []
        with base._importable_in_children():
            for rank in range(self.world):
                inbox = self.inboxes[rank] if self.inboxes else None
                p = self.ctx.Process(target=_worker, args=(rank, self.world, port, jobs, self.queue, inbox),
                                     daemon=True)
                p.start()
                self.procs.append(p)
        for spec in self.ref_params:
            self._send(spec)
        self._watch_from_now()

    def _kill(self):
        super()._kill()
        for inbox in self.inboxes:  # a dead reader must not keep the parent's feeder thread
            inbox.close()
            inbox.cancel_join_thread()
        self.inboxes = []


# ----------------------------------------------------------------------------------------
# Worker side
# ----------------------------------------------------------------------------------------

def _worker(rank: int, world: int, port: int, jobs: list, queue, inbox=None):
    try:
        import warnings
        from datetime import timedelta

        warnings.simplefilter("ignore")
        with contextlib.suppress(Exception):
            if "lo" in {name for _, name in socket.if_nameindex()}:
                os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port or 29500))
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        if world == 1:
            store = dist.HashStore()
        else:
            store = dist.TCPStore("127.0.0.1", port, world, is_master=(rank == 0), timeout=timedelta(seconds=120))
        _map_cuda_to_cpu()
        import torch.distributed.tensor  # noqa: F401  (the runner reads DTensors; a slow first import is not a job's time)
        import torch.nn.parallel  # noqa: F401
        # Every rank has started (imported torch and the libraries) before the first job's
        # clock starts: a slow start-up must not look like a deadlock.
        store.add("workers_ready", 1)
        while store.add("workers_ready", 0) < world:
            time.sleep(0.05)
    except BaseException:
        queue.put(("fatal", rank, traceback.format_exc()))
        return
    received: dict = {}
    for idx, spec_dict in jobs:
        spec = Spec(**spec_dict)
        while inbox is not None and idx not in received:
            got, values = inbox.get()
            received[got] = values
        ref_params = received.pop(idx, {})
        queue.put(("start", rank, idx))
        try:
            payload = _execute(spec, rank, world, store, idx, ref_params)
        except BaseException:
            queue.put(("error", rank, idx, base._short_tb()))
        else:
            queue.put(("done", rank, idx, payload))
    queue.put(("exit", rank))
    queue.close()
    queue.join_thread()


def _map_cuda_to_cpu():
    """What a torchrun script asks of CUDA and of process-group set-up, done on CPU/gloo.  The tool's
    CUDA stand-in (devices, the CUDA generator, megatron-core's RNG tracker and fused LayerNorm kernel)
    when it can be imported: it is the environment both sides run in, not part of the proof."""
    with contextlib.suppress(ImportError):
        from frontends.traced.cuda_standin import map_cuda_to_cpu

        map_cuda_to_cpu()
    import torch
    import torch.distributed as dist
    import torch.distributed.device_mesh as dm

    real_mesh = dm.init_device_mesh

    def init_device_mesh(device_type, *args, **kwargs):
        return real_mesh("cpu" if str(device_type).startswith("cuda") else device_type, *args, **kwargs)

    dm.init_device_mesh = init_device_mesh
    with contextlib.suppress(ImportError, AttributeError):
        import torch.distributed as td
        td.device_mesh.init_device_mesh = init_device_mesh
    torch.cuda.set_device = lambda *a, **k: None
    # Megatron allocates its sequence-parallel gather buffer on torch.cuda.current_device()
    torch.cuda.current_device = lambda: torch.device("cpu")
    real_init = dist.init_process_group

    def init_process_group(*args, **kwargs):
        if not dist.is_initialized():
            real_init(*args, **kwargs)

    dist.init_process_group = init_process_group
    dist.destroy_process_group_by_runner = dist.destroy_process_group
    dist.destroy_process_group = lambda *a, **k: None


def _execute(spec: Spec, rank: int, world: int, store, idx: int, ref_params: dict) -> dict:
    import torch
    import torch.distributed as dist

    base.poison_uninitialized_memory()
    old_dtype = torch.get_default_dtype()
    name = f"_realworld_driver_{idx}"
    dist.init_process_group("gloo", store=dist.PrefixStore(f"job{idx}", store), rank=rank, world_size=world,
                            timeout=base._GLOO_TIMEOUT)
    ps = None
    try:
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(spec.seed)
        module = base._import_file(spec.path, name)
        ps = _megatron_state()
        kind = _entry_kind(module)
        if kind == "launch":
            return _launch_payload(module, ps)
        params: list = []
        if kind == "build":
            from torch.distributed.device_mesh import init_device_mesh

            torch.manual_seed(spec.seed + 1)
            fn = module.build(init_device_mesh("cpu", (world,)))
            params = [(n, p) for prefix, m in base._modules_reachable_from(fn)
                      for n, p in ((prefix + n, p) for n, p in m.named_parameters())]
        elif kind == "module":
            torch.manual_seed(spec.seed + 1)
            fn = module.example_module()
            ps = _megatron_state()
            with torch.no_grad():
                for p in fn.parameters():
                    if p.is_floating_point() and p.dtype != torch.float64 and not _is_dtensor(p):
                        p.data = p.data.to(torch.float64)
            params = list(fn.named_parameters())
        else:
            fn = module.forward
        if ps is not None and not ps.model_parallel_is_initialized():
            ps.initialize_model_parallel(tensor_model_parallel_size=world)
        payload: dict = {"outputs": [], "grads": []}
        if world == 1:
            payload["param_values"] = {n: _to_numpy(p) for n, p in params}
        elif ref_params:
            _copy_reference_values(params, ref_params, rank, world)
        # else the 1-rank reference gave no values (it raised): the ranks keep their own seeded values;
        # no numbers are compared then, only whether and how the ranks raise (a mutant that raises the
        # same way on 1 rank and on N is broken code, not a distributed bug)
        torch.manual_seed(spec.seed)
        inputs = _inputs(module)
        out = fn(*inputs)
        flat = list(base._flatten(out))
        payload["outputs"] = [(f"out{path}", _to_numpy(t)) for path, t in flat]
        loss = None
        for i, (_, t) in enumerate(flat):
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad:
                t = _full(t)
                gen = torch.Generator().manual_seed(spec.seed * 7919 + 104729 + i)
                term = (t * torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)).sum()
                loss = term if loss is None else loss + term
        if loss is not None:
            loss.backward()
        _finalize_sequence_parallel_grads(params, ps)
        for i, t in enumerate(inputs):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                g = t.grad if t.grad is not None else torch.zeros_like(t)
                payload["grads"].append((f"grad[input {i}]", "input", None, _to_numpy(g)))
        payload["grads"] += _param_grads(params)
        return payload
    finally:
        torch.set_default_dtype(old_dtype)
        sys.modules.pop(name, None)
        if ps is not None:
            with contextlib.suppress(Exception):
                ps.destroy_model_parallel()
        with contextlib.suppress(Exception):
            dist.destroy_process_group_by_runner()


def _megatron_state():
    if "megatron.core" not in sys.modules and "megatron" not in sys.modules:
        return None
    try:
        from megatron.core import parallel_state
    except ImportError:
        return None
    return parallel_state


def _entry_kind(module) -> str:
    if not inspect.isfunction(getattr(module, "example_inputs", None)):
        return "launch"
    for kind, attr in (("build", "build"), ("module", "example_module"), ("forward", "forward")):
        if inspect.isfunction(getattr(module, attr, None)):
            return kind
    raise LookupError("no entry: expected build(mesh), example_module(), forward(...) or module-level code")


def _inputs(module) -> list:
    import torch

    made = module.example_inputs()
    if not isinstance(made, (tuple, list)):
        made = (made,)
    out = []
    for t in made:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            t = t.detach().to(torch.float64).requires_grad_(t.requires_grad)
        out.append(t)
    return out


def _is_dtensor(t) -> bool:
    return base._is_dtensor(t)


def _full(t):
    return t.full_tensor() if _is_dtensor(t) else t


def _to_numpy(t):
    """Like the shared runner's, but a float32 result stays float32: it tells the comparison
    that the library computed in single precision (Megatron's cross entropy does)."""
    import torch

    if isinstance(t, torch.Tensor) and t.is_floating_point():
        t = _full(t).detach().cpu()
        return t.numpy().copy() if t.dtype in (torch.float32, torch.float64) else t.to(torch.float32).numpy().copy()
    return base._to_numpy(t)


def _layout(p):
    """How a parameter's rank piece relates to the reference value (see module docstring)."""
    if _is_dtensor(p):
        return ("dtensor",)
    if getattr(p, "tensor_model_parallel", False) and getattr(p, "partition_dim", -1) >= 0:
        return ("megatron", int(p.partition_dim), int(getattr(p, "partition_stride", 1)))
    return ("shape",)


def _megatron_pieces(value, dim: int, stride: int, world: int):
    import torch

    chunks = torch.chunk(value, world * stride, dim=dim)
    return [torch.cat(chunks[r::world], dim=dim) for r in range(world)]


def _copy_reference_values(params, ref_params: dict, rank: int, world: int):
    import torch

    for name, p in params:
        if name not in ref_params:
            raise RuntimeError(f"parameter {name} does not exist in the 1-rank reference")
        value = torch.from_numpy(ref_params[name]).to(p.dtype)
        layout = _layout(p)
        with torch.no_grad():
            if layout[0] == "dtensor":
                from torch.distributed.tensor import distribute_tensor

                p.to_local().copy_(distribute_tensor(value, p.device_mesh, p.placements).to_local())
            elif layout[0] == "megatron":
                p.copy_(_megatron_pieces(value, layout[1], layout[2], world)[rank])
            elif tuple(p.shape) == tuple(value.shape):
                p.copy_(value)
            else:
                dims = [d for d in range(p.dim()) if p.dim() == value.dim() and p.shape[d] != value.shape[d]]
                if len(dims) != 1 or p.shape[dims[0]] * world != value.shape[dims[0]]:
                    raise RuntimeError(f"parameter {name}: local shape {tuple(p.shape)} is not a 1/{world} "
                                       f"block of the reference shape {tuple(value.shape)}")
                p.copy_(value.chunk(world, dim=dims[0])[rank])


def _finalize_sequence_parallel_grads(params, ps):
    import torch.distributed as dist

    if ps is None or not ps.model_parallel_is_initialized():
        return
    for _, p in params:
        if getattr(p, "sequence_parallel", False) and p.grad is not None and not _is_dtensor(p):
            dist.all_reduce(p.grad, group=ps.get_tensor_model_parallel_group())


def _param_grads(params) -> list:
    import torch

    grads = []
    for name, p in params:
        g = p.grad
        if g is None:
            g = None if _is_dtensor(p) else torch.zeros(p.shape, dtype=p.dtype)
        grads.append((f"grad[param {name}]", "param", _layout(p), None if g is None else _to_numpy(g)))
    return grads


def _launch_payload(module, ps) -> dict:
    """The training state a launch script leaves: the parameters of every module-level
    ``nn.Module`` (DDP's ``.module`` unwrapped, each parameter once), their values after the
    script ran and their gradients.  Other module-level tensors are per-rank by nature
    (local batch, local loss) and are not compared."""
    import torch.nn as nn

    params, seen = [], set()
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or not isinstance(value, nn.Module):
            continue
        inner = value.module if isinstance(value, nn.parallel.DistributedDataParallel) else value
        for n, p in inner.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                params.append((f"{name}.{n}", p))
    _finalize_sequence_parallel_grads(params, ps)
    outputs = [(f"out[param {n}]", _to_numpy(p)) for n, p in params]
    return {"outputs": outputs, "grads": _param_grads(params)}


# ----------------------------------------------------------------------------------------
# Comparison (parent side)
# ----------------------------------------------------------------------------------------

def _tolerance(arrays) -> tuple[float, float]:
    floats = [a for a in arrays if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if floats and all(a.dtype == np.float64 for a in floats):
        return 1e-7, 1e-9
    return 1e-4, 1e-5


def _reassemble(layout, per_rank: list, ref):
    """The global gradient from the rank pieces, or None when the pieces are the full value."""
    if layout[0] == "dtensor" or all(a.shape == ref.shape for a in per_rank):
        return None
    if layout[0] == "megatron":
        dim, stride = layout[1], layout[2]
        split = [np.array_split(a, stride, axis=dim) for a in per_rank]
        return np.concatenate([split[r][k] for k in range(stride) for r in range(len(per_rank))], axis=dim)
    dims = [d for d in range(ref.ndim) if per_rank[0].ndim == ref.ndim and per_rank[0].shape[d] != ref.shape[d]]
    if len(dims) != 1:
        raise ValueError("cannot relate the rank pieces to the reference shape")
    return np.concatenate(per_rank, axis=dims[0])


def _compare_param_grad(name, layout, ref, per_rank, rtol, atol) -> OutputDetail:
    shapes = [base._shape(a) for a in per_rank]
    if ref is None or any(a is None for a in per_rank):
        same = ref is None and all(a is None for a in per_rank)
        return OutputDetail(name, same, 0.0 if same else math.inf, base._shape(ref), shapes, "no gradient")
    try:
        full = _reassemble(layout, per_rank, ref)
    except ValueError as exc:
        return OutputDetail(name, False, math.inf, base._shape(ref), shapes, str(exc))
    if full is None:
        return base._compare_each_rank(name, ref, per_rank, rtol, atol, f"layout {layout[0]}: full gradient per rank")
    same, d = base._diff(full, ref, rtol, atol)
    return OutputDetail(name, same, d, base._shape(ref), shapes, f"layout {layout}: rank pieces re-assembled")


def _compare(job: Job, ref, par) -> GroundTruthResult:
    spec = job.spec
    common = dict(path=spec.path, world=job.world, mode="grad", entry=None)
    if ref.timed_out or ref.errors:
        err = "reference (1 rank) timed out" if ref.timed_out else "reference (1 rank) failed: " + base._first_error(ref.errors)
        return GroundTruthResult(**common, runnable=False, matches=False, status=STATUS_NOT_RUNNABLE,
                                 max_abs_diff=math.nan, error=err, seconds=par.seconds)
    if par.timed_out:
        err = f"no progress after {spec.timeout:.0f}s; ranks still running: {par.stuck_ranks}"
        return GroundTruthResult(**common, runnable=True, matches=False, status=STATUS_TIMEOUT,
                                 max_abs_diff=math.inf, error=err, seconds=par.seconds)
    if par.errors:
        return GroundTruthResult(**common, runnable=True, matches=False, status=STATUS_ERROR,
                                 max_abs_diff=math.inf, error=base._first_error(par.errors), seconds=par.seconds)
    rp = ref.payloads[0]
    ranks = [par.payloads[r] for r in range(job.world)]
    # float32 anywhere in the reference (Megatron computes its loss in float32) loosens every
    # comparison of the driver to float32 tolerances: gradients flow back through it.
    rtol, atol = _tolerance([a for _, a in rp["outputs"]] + [g[3] for g in rp["grads"]])
    details = []
    for n, a in rp["outputs"]:
        per_rank = [dict(r["outputs"]).get(n) for r in ranks]
        if any(x is None for x in per_rank):
            details.append(OutputDetail(n, False, math.inf, base._shape(a), [], "missing on some rank"))
            continue
        details.append(base._compare_each_rank(n, a, per_rank, rtol, atol))
    if any(len(r["outputs"]) != len(rp["outputs"]) for r in ranks):
        details.append(OutputDetail("outputs", False, math.inf, None, [], "number of outputs differs"))
    for gname, kind, layout, gref in rp["grads"]:
        entries = [next((g for g in r["grads"] if g[0] == gname), None) for r in ranks]
        if any(e is None for e in entries):
            details.append(OutputDetail(gname, False, math.inf, base._shape(gref), [], "missing on some rank"))
            continue
        per_rank = [e[3] for e in entries]
        if kind == "input":
            details.append(base._compare_input_grad(gname, gref, per_rank, rtol, atol))
        else:
            details.append(_compare_param_grad(gname, entries[0][2], gref, per_rank, rtol, atol))
    matches = all(d.matches for d in details)
    worst = max((d.max_abs_diff for d in details), default=0.0)
    return GroundTruthResult(**common, runnable=True, matches=matches,
                             status=STATUS_MATCH if matches else STATUS_MISMATCH,
                             max_abs_diff=worst, details=details, seconds=par.seconds)


def forward_matches(result: GroundTruthResult) -> bool:
    """True when every output (not gradient) agrees."""
    return result.status == STATUS_MATCH or (
        result.status == STATUS_MISMATCH and all(d.matches for d in result.details if not d.name.startswith("grad")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--world", type=int, action="append", help="rank count (repeatable; default 2 and 4)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    args = ap.parse_args(argv)
    jobs = [Job(Spec(str(Path(f).resolve()), timeout=args.timeout), w) for f in args.files for w in (args.world or [2, 4])]
    all_ok = True
    for res in run_jobs(jobs):
        all_ok &= res.matches
        print(res.summary())
        for d in res.details:
            if not d.matches:
                print(f"    {d.name}: max|diff|={d.max_abs_diff:.3g} ref={d.ref_shape} ranks={d.rank_shapes} {d.note}")
        if res.error:
            print("    " + res.error.strip().replace("\n", "\n    ")[-3000:])
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
