"""The child side of ``execute.py``: one rank running the user's file with gloo on CPU.

Loads the source as a module, finds the entry (``forward``, ``build(mesh)``, an ``nn.Module``
class), hands it the IR's global inputs by name (module parameters get their global value, or
this rank's block when the code allocates a shard), runs it without autograd and reports the
flattened outputs as NumPy arrays.  A failure of this harness (a module that is not installed,
an input it cannot map) is a ``HarnessError``: it means "could not run", never "the code is wrong".
"""
from __future__ import annotations

import contextlib
import os
import sys
import traceback
import types
from typing import Any

import numpy as np


class HarnessError(Exception):
    """This harness cannot run the file (not a fault of the file's parallel code)."""


def run_rank(rank: int, world: int, port: int, mesh: tuple[tuple[str, int], ...], job: dict, results) -> None:
    """Entry point of one child process: run the job as ``rank`` of ``world``, report on ``results``."""
    try:
        from frontends.sandbox import DEFAULT_MEMORY_BYTES, enter_child

        # before any user code: no secrets in the environment, memory and CPU limits, loopback only
        enter_child(job.get("memory_bytes", DEFAULT_MEMORY_BYTES), job["timeout"])
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
        timeout = timedelta(seconds=max(5.0, job["timeout"]))
        if world == 1:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        else:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                    timeout=timeout)
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
