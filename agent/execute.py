"""Run the user's source for real — on 1 rank and on N ranks — with the same global inputs.

Why: when the verifier finds a counterexample on an IR the LLM proposed, two stories fit —
the source is wrong, or the IR is.  Only the source's own numbers can tell them apart.  The
1-rank run is the reference (the same program on a world of size 1, exactly what the
verifier proves against); the N-rank run uses gloo on CPU over 127.0.0.1.

Conventions (those of the sample cases): ``example_inputs()`` gives global inputs; the entry
is ``forward(*inputs)`` (every rank gets the whole inputs and returns the global output),
``build(mesh)`` returning the parallelised callable, or an ``nn.Module`` class built without
arguments.  Inputs are handed over by IR input name; module parameters whose names match an
IR input get that global value (this rank's block when the code allocates a shard).

Every run happens in child processes (a torch-preloaded fork server where the platform has
one, so a run costs well under a second after the first) and is stopped by a timeout: user
code can deadlock.  Nothing here needs torch in the parent process.
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import multiprocessing
import os
import queue as queue_module
import socket
import sys
import time
import traceback
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_TIMEOUT = 60.0
PEER_GRACE = 3.0  # after one rank fails, how long the others may take before they are stopped
SOURCE_RTOL, SOURCE_ATOL = 1e-7, 1e-9  # float64 on both sides: only reduction order differs


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


@dataclass(frozen=True)
class SourceRun:
    """What one group of ranks returned (flattened outputs per rank) or why it did not."""

    world: int
    outputs: tuple[tuple[Any, ...], ...] | None = None
    error: str | None = None
    timed_out: bool = False
    unrunnable: bool = False  # the harness could not run it (missing module, unmappable inputs)

    @property
    def ok(self) -> bool:
        return self.outputs is not None and self.error is None and not self.timed_out

    def failure(self) -> str:
        if self.timed_out:
            return f"no result after the timeout on {self.world} rank(s) (deadlock?)"
        return (self.error or "no result").strip().splitlines()[-1]


@dataclass(frozen=True)
class Difference:
    """The first place the N-rank outputs differ from the 1-rank outputs."""

    output: int
    rank: int
    index: tuple[int, ...]
    reference: Any
    parallel: Any
    max_abs_diff: float

    def __str__(self) -> str:
        where = f"output {self.output}" + (f"[{', '.join(map(str, self.index))}]" if self.index else "")
        return (f"{where} is {_number(self.parallel)} on rank {self.rank} of the parallel run but "
                f"{_number(self.reference)} on 1 rank (max |diff| {self.max_abs_diff:.3g})")


@dataclass(frozen=True)
class Execution:
    reference: SourceRun
    parallel: SourceRun

    def difference(self) -> Difference | None:
        """None when every rank returns the reference outputs (within float64 noise)."""
        reference = self.reference.outputs[0]
        for rank, outputs in enumerate(self.parallel.outputs):
            if len(outputs) != len(reference):
                return Difference(min(len(outputs), len(reference)), rank, (), f"{len(reference)} outputs",
                                  f"{len(outputs)} outputs", math.inf)
            for position, (want, got) in enumerate(zip(reference, outputs)):
                found = compare(want, got, SOURCE_RTOL, SOURCE_ATOL)
                if found is not None:
                    index, max_diff = found
                    return Difference(position, rank, index, _at(want, index), _at(got, index), max_diff)
        return None


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _at(value: Any, index: tuple[int, ...]) -> Any:
    array = np.asarray(value)
    if index and array.ndim == len(index):
        item = array[index]
        return float(item) if array.dtype.kind == "f" else item.item()
    return f"shape {tuple(array.shape)}" if array.ndim else (float(array) if array.dtype.kind == "f" else array.item())


def compare(want: Any, got: Any, rtol: float, atol: float) -> tuple[tuple[int, ...], float] | None:
    """(first differing index, max |diff|) or None when close; shape mismatches differ at ()."""
    a, b = np.asarray(want), np.asarray(got)
    if a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
        return None if str(want) == str(got) else ((), math.inf)
    if a.shape != b.shape:
        return (), math.inf
    if a.size == 0:
        return None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close = np.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    bad = tuple(int(i) for i in np.argwhere(~close)[0])
    with np.errstate(invalid="ignore"):
        diff = float(np.nanmax(np.abs(a64 - b64))) if np.isfinite(a64).all() and np.isfinite(b64).all() else math.inf
    return bad, diff


# --- parent side ------------------------------------------------------------------------------

_CONTEXT: Any = None


def _context():
    """A fork server with torch preloaded (fast repeated runs), else spawn."""
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(["torch", "torch.distributed", __name__])
        else:
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


@contextlib.contextmanager
def _without_main_module():
    """Start children without re-importing the parent's ``__main__`` (a REPL, stdin, a CLI
    script): they need nothing from it, and importing it costs time or fails."""
    main = sys.modules.get("__main__")
    saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
    try:
        if "__file__" in saved:
            del main.__file__
        if main is not None:
            main.__spec__ = None
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)


def warm_up() -> None:
    """Start the torch-preloading fork server now, so its imports overlap with other work
    (an LLM request, a proof) instead of delaying the first run."""
    if torch_available():
        ctx = _context()
        if ctx.get_start_method() == "forkserver":
            from multiprocessing import forkserver

            with _without_main_module():
                forkserver.ensure_running()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_source(source: str, path: str, *, mesh: tuple[tuple[str, int], ...],
               inputs: dict[str, np.ndarray] | None = None, entry: str | None = None,
               timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> Execution:
    """Run ``source`` on 1 rank and on ``mesh``'s ranks concurrently; ``inputs`` by IR name
    (None: the file's own ``example_inputs()``, seeded)."""
    ctx = _context()
    results: queue_module.Queue = ctx.Queue()
    unit = tuple((name, 1) for name, _ in mesh)
    world = math.prod(size for _, size in mesh)
    job = {"source": source, "path": path, "entry": entry, "seed": seed, "timeout": timeout,
           "inputs": {k: np.asarray(v) for k, v in inputs.items()} if inputs is not None else None}
    groups = {1: (unit, _free_port()), world: (mesh, _free_port())} if world > 1 else {1: (unit, _free_port())}
    processes: list[tuple[int, Any]] = []
    with _without_main_module():
        for size, (dims, port) in groups.items():
            for rank in range(size):
                process = ctx.Process(target=_worker, args=(rank, size, port, dims, job, results), daemon=True)
                process.start()
                processes.append((size, process))
    outcome: dict[int, dict[int, Any]] = {size: {} for size in groups}
    errors: dict[int, str] = {}
    unrunnable: set[int] = set()
    deadline = time.monotonic() + timeout
    first_error: float | None = None
    expected = sum(groups)
    received = 0
    stopped_early = False
    try:
        while received < expected:
            now = time.monotonic()
            if now > deadline or (first_error is not None and now - first_error > PEER_GRACE):
                stopped_early = True
                break
            try:
                kind, size, rank, payload = results.get(timeout=0.05)
            except queue_module.Empty:
                if not any(p.is_alive() for _, p in processes):
                    break
                continue
            received += 1
            if kind == "done":
                outcome[size][rank] = payload
            else:
                errors.setdefault(size, f"rank {rank}: {payload}")
                if kind == "harness":
                    unrunnable.add(size)
                first_error = first_error or time.monotonic()
    finally:
        for _, process in processes:
            if process.is_alive():
                process.kill()
        for _, process in processes:
            process.join(timeout=5)
        with contextlib.suppress(Exception):
            results.close()
            results.cancel_join_thread()

    def run_of(size: int) -> SourceRun:
        if size in errors:
            return SourceRun(size, error=errors[size], unrunnable=size in unrunnable)
        if len(outcome[size]) < size:
            if stopped_early:
                return SourceRun(size, timed_out=True)
            codes = sorted({p.exitcode for s, p in processes if s == size and p.exitcode not in (0, None)})
            return SourceRun(size, error=f"a worker process exited (code {codes}) without reporting",
                             unrunnable=True)
        return SourceRun(size, outputs=tuple(tuple(outcome[size][r]) for r in range(size)))

    reference = run_of(1)
    return Execution(reference, run_of(world) if world > 1 else reference)


# --- child side -------------------------------------------------------------------------------

class HarnessError(Exception):
    """This harness cannot run the file (not a fault of the file's parallel code)."""


def _worker(rank: int, world: int, port: int, mesh: tuple[tuple[str, int], ...], job: dict, results) -> None:
    try:
        with contextlib.suppress(Exception):
            if "lo" in {name for _, name in socket.if_nameindex()}:
                os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        outputs = _execute(rank, world, port, mesh, job)
        results.put(("done", world, rank, outputs))
    except HarnessError as problem:
        results.put(("harness", world, rank, str(problem)))
    except BaseException:  # the user's code may raise anything; report it, never hang
        text = traceback.format_exc()
        results.put(("error", world, rank, text if len(text) < 4000 else text[-4000:]))


def _execute(rank: int, world: int, port: int, mesh: tuple[tuple[str, int], ...], job: dict) -> list:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=max(5.0, job["timeout"])))
    except Exception as exc:
        raise HarnessError(f"cannot start gloo on 127.0.0.1: {exc}") from exc
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        try:
            module = _load(job["source"], job["path"])
            kind, target = _resolve_entry(module, job["entry"])
        except (ImportError, LookupError, AttributeError) as exc:
            raise HarnessError(f"cannot load the entry: {exc.__class__.__name__}: {exc}") from exc
        _init_megatron(world)
        torch.manual_seed(job["seed"])
        inputs = job["inputs"]
        if kind == "build":
            from torch.distributed.device_mesh import init_device_mesh

            device_mesh = init_device_mesh("cpu", tuple(s for _, s in mesh), mesh_dim_names=tuple(n for n, _ in mesh))
            function = target(device_mesh)
            if inputs is not None:
                _harness(_assign_parameters, _modules_of(function), inputs, rank, world)
        elif kind == "module":
            function = target()
            if inputs is not None:
                _harness(_assign_parameters, [function], inputs, rank, world)
        else:
            function = target
        try:
            arguments = (_arguments(function, inputs) if inputs is not None
                         else _example_arguments(module, job["seed"]))
        except LookupError as exc:
            raise HarnessError(str(exc)) from exc
        with torch.no_grad():
            result = function(*arguments)
        return [_to_numpy(value) for value in _flatten(result)]
    finally:
        torch.set_default_dtype(previous)
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _harness(step, *args) -> None:
    try:
        step(*args)
    except LookupError as exc:
        raise HarnessError(str(exc)) from exc


def _load(source: str, path: str) -> types.ModuleType:
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = types.ModuleType("_verify_agent_source")
    module.__file__ = path
    sys.modules[module.__name__] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def _resolve_entry(module: types.ModuleType, entry: str | None) -> tuple[str, Any]:
    import inspect

    import torch.nn as nn

    def kind_of(obj: Any, name: str) -> str:
        if inspect.isclass(obj) and issubclass(obj, nn.Module):
            return "module"
        return "build" if name == "build" else "function"

    if entry:
        return kind_of(getattr(module, entry), entry), getattr(module, entry)
    for name in ("build", "forward"):
        if inspect.isfunction(getattr(module, name, None)):
            return name if name == "build" else "function", getattr(module, name)
    classes = [v for v in vars(module).values()
               if inspect.isclass(v) and issubclass(v, nn.Module) and v.__module__ == module.__name__]
    if classes:
        return "module", classes[-1]
    functions = [v for k, v in vars(module).items()
                 if inspect.isfunction(v) and v.__module__ == module.__name__ and k != "example_inputs"]
    if len(functions) == 1:
        return "function", functions[0]
    raise LookupError("no entry: expected build(mesh), forward(...), an nn.Module class, or --entry")


def _init_megatron(world: int) -> None:
    if "megatron" not in sys.modules:
        return
    with contextlib.suppress(ImportError):
        from megatron.core import parallel_state

        if not parallel_state.model_parallel_is_initialized():
            parallel_state.initialize_model_parallel(tensor_model_parallel_size=world)


def _tensor(array: np.ndarray):
    import torch

    array = np.asarray(array)
    if array.dtype.kind == "f":
        return torch.tensor(array, dtype=torch.float64)
    if array.dtype.kind == "b":
        return torch.tensor(array, dtype=torch.bool)
    return torch.tensor(array, dtype=torch.int64)


def _arguments(function: Any, inputs: dict[str, np.ndarray]) -> list:
    import inspect

    parameters = [p for p in inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unused = [name for name in inputs if name not in {p.name for p in parameters}]
    arguments = []
    for parameter in parameters:
        if parameter.name in inputs:
            arguments.append(_tensor(inputs[parameter.name]))
        elif parameter.default is not parameter.empty:
            break
        elif unused:
            arguments.append(_tensor(inputs[unused.pop(0)]))
        else:
            raise LookupError(f"no IR input for the entry's argument {parameter.name!r}")
    return arguments


def _example_arguments(module: types.ModuleType, seed: int) -> list:
    import torch

    make = getattr(module, "example_inputs", None)
    if make is None:
        raise LookupError("the file has no example_inputs()")
    torch.manual_seed(seed)
    values = make()
    values = values if isinstance(values, (tuple, list)) else (values,)
    vocab = getattr(module, "VOCAB", None)
    out = []
    for value in values:
        if isinstance(value, torch.Tensor) and not value.is_floating_point() and isinstance(vocab, int) \
                and value.dtype in (torch.int64, torch.int32):
            value = torch.randint(0, vocab, value.shape, generator=torch.Generator().manual_seed(seed + 17))
        out.append(value)
    return out


def _modules_of(function: Any) -> list:
    import torch.nn as nn

    found = []
    for candidate in [function, getattr(function, "__self__", None)] + [
            cell.cell_contents for cell in (getattr(function, "__closure__", None) or ())
            if _has_contents(cell)]:
        if isinstance(candidate, nn.Module) and all(candidate is not m for m in found):
            found.append(candidate)
    return found


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _matching_input(name: str, inputs: dict[str, np.ndarray]) -> str | None:
    for candidate in (name, name.replace(".", "_"), name.split(".")[-1]):
        if candidate in inputs:
            return candidate
    return None


def _assign_parameters(modules: list, inputs: dict[str, np.ndarray], rank: int, world: int) -> None:
    """Give parameters the IR's global values (this rank's block when the code shards them)."""
    import torch

    for module in modules:
        for name, parameter in module.named_parameters():
            key = _matching_input(name, inputs)
            if key is None:
                raise LookupError(f"parameter {name!r} has no IR input of the same name, so the run cannot use "
                                  f"the IR's values")
            value = _tensor(inputs[key]).to(parameter.dtype if not hasattr(parameter, "device_mesh")
                                            else torch.float64)
            with torch.no_grad():
                if hasattr(parameter, "device_mesh"):  # a DTensor parameter: distribute the global value
                    from torch.distributed.tensor import distribute_tensor

                    parameter.copy_(distribute_tensor(value.to(parameter.dtype), parameter.device_mesh,
                                                      parameter.placements))
                    continue
                parameter.copy_(_local_block(name, value, tuple(parameter.shape), rank, world))


def _local_block(name: str, value, local_shape: tuple[int, ...], rank: int, world: int):
    if tuple(value.shape) == local_shape:
        return value
    dims = [d for d in range(len(local_shape)) if len(local_shape) == value.dim() and value.shape[d] != local_shape[d]]
    if len(dims) != 1 or value.shape[dims[0]] != local_shape[dims[0]] * world:
        raise LookupError(f"parameter {name!r}: local shape {local_shape} is not a 1/{world} block of the IR's "
                          f"global shape {tuple(value.shape)}")
    return value.chunk(world, dim=dims[0])[rank]


def _flatten(value: Any):
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _flatten(item)
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from _flatten(value[key])
    else:
        yield value


def _to_numpy(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        if hasattr(value, "full_tensor"):
            value = value.full_tensor()
        value = value.detach().cpu()
        if value.is_floating_point():
            value = value.to(torch.float64)
        return value.numpy().copy()
    if isinstance(value, (int, float, bool)):
        return np.asarray(value)
    return repr(value)
