"""One run of the user's entry: world 1 (the reference) or one rank of the parallel world.

The file is imported fresh under a unique module name (module-level state never leaks between
runs); the process group, the entry's construction and its inputs are set up *unrecorded*, then
the forward, a backward (the user's, or ``sum(out * cotangent)`` with a fixed cotangent leaf)
and Megatron's gradient finalisation of ``sequence_parallel`` parameters run under the
recorder.  The world-1 run uses a real gloo group of one process (its collectives compute real
values); rank runs use torch's fake process group (no peers; values after a collective are not
real, which the recorder tracks).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import itertools
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.distributed as dist

from verifier.ir import Span

from . import collectives, harness, megatron_setup, package_state, styles
from .backward_raises import BackwardReturns, raising_backward
from .bindings import LineTrace
from .cuda_standin import library_rng_helpers, map_cuda_to_cpu
from .data_assignment import FollowDataAssignment
from .inference import without_inference_mode
from .entries import (EntryError, EntrySpec, construct_module, construct_style, construct_transformed, entry_function,
                      example_inputs, explicitly_not_trainable, find_entry, forward_arguments)
from .location import locate
from .recorder import Problem, Recorder, Recording
from .sizes import apply_sizes, size_constants
from .parameter_lines import ParameterLines
from .module_lines import module_lines
from .spans import SpanFinder

Region = tuple[tuple[int, int], ...]
_MODULE_SERIAL = itertools.count()


@dataclass(frozen=True)
class Leaf:
    """A reference leaf as this run holds it: ``local`` is the name of the rank's piece."""

    name: str
    local: str
    shape: tuple[int, ...]
    local_shape: tuple[int, ...]
    requires_grad: bool
    kind: str                          # "input" | "parameter" | "cotangent"
    region: Region | None = None       # known from DTensor placements
    layout_source: str | None = None
    megatron: tuple[int, int] | None = None   # (partition_dim, partition_stride)
    span: Span = field(default_factory=Span)
    # an input whose every autograd consumer is a slicing view (SliceBackward0, SplitBackward0, ...):
    # torch makes its gradient zero outside the blocks the run read
    read_by_autograd_slices: bool = False
    made: Span = field(default_factory=Span)   # a parameter: the user's line that made it
    created_trainable: bool = False   # an input the user's code made with requires_grad=True


@dataclass(frozen=True)
class Value:
    """An output or gradient this run produced."""

    label: str
    kind: str                          # "output" | "gradient"
    key: str                           # what it is matched by across runs (output index, leaf name)
    name: str | None
    shape: tuple[int, ...]
    region: Region | None = None       # known (DTensor placements), else inferred by shape
    span: Span = field(default_factory=Span)


@dataclass
class RunResult:
    world: int
    rank: int
    recording: Recording
    leaves: list[Leaf]
    values: list[Value]
    passes: tuple[str, ...]
    assumptions: list[str]
    mesh: dict[str, int]
    constants: dict = field(default_factory=dict)   # the file's own size constants
    layouts: dict = field(default_factory=dict)     # blocks the entry itself states (a style's layouts)
    not_run: dict = field(default_factory=dict)     # pass -> why it was not run ("backward": torch refused it)
    inputs_as_made: bool = False                    # RunRequest.inputs_as_made


@dataclass(frozen=True)
class RunRequest:
    path: str
    shown_as: str
    entry: str | None
    shapes: dict
    seed: int = 0
    sizes: dict = field(default_factory=dict)   # module-level constants to override (sizes.py)
    no_grad: tuple[str, ...] = ()               # inputs and parameters the user says are not trained
    paths: tuple[str, ...] = ()                 # --path: directories to import from (location.py)
    args: dict = field(default_factory=dict)    # --arg NAME=LITERAL, already read (entries.parse_arg)
    layouts: dict = field(default_factory=dict)  # --param-layout / --expect: an input's rank block (Shard(d))
    harness: str | None = None                  # a harness file building the entry and its inputs
    # inputs example_inputs() made trainable handed over as those leaves, not as activations: the
    # code accepts only leaves (``needs_leaf_inputs``)
    inputs_as_made: bool = False


class ModuleLevelError(Exception):
    """The file's module-level code raised on import (a launch script, or code that needs a real cluster)."""


class ArgumentsFailed(Exception):
    """Building the entry with the arguments this tool chose (defaults, inferred configs and inputs) raised
    in the user's code: an input error that a harness (``--harness``, or an LLM's) may get past."""


def _tool_chose_arguments(module, spec: EntrySpec) -> bool:
    """No ``build()``, ``example_module()``, ``example_args()`` or literal ``--entry Cls(...)`` arguments."""
    return spec.kind in ("module", "function") and spec.name != "example_module" and not spec.args \
        and not spec.kwargs and not callable(getattr(module, "example_args", None))


class UserCodeError(Exception):
    """The user's code raised: carries the user's line.  ``unreal``: why the exception may come from
    the simulation rather than the code (it read values a simulated collective computed, or it was
    raised inside torch.distributed's process-group layer, which the fake group stands in for)."""

    def __init__(self, line: int | None, message: str, unreal: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.unreal = unreal
        self.tool_arguments = False   # raised on arguments this tool chose (not the file's, not the user's)
        self.drawn: list[str] = []    # the call inputs the harness drew for this run (their values are ours)
        self.recording = None         # what the run recorded up to the raise (where its shapes went wrong)
        self.file: str | None = None  # the file of ``line`` when it is a module of the user's package


def _raised(error: BaseException, recorder: Recorder, backward: tuple[str, int] | None = None) -> UserCodeError:
    """The user's code raised ``error`` during this run.  ``backward``: the (file, line) of the custom
    Function backward that raised or returned the rejected gradient; in the user's package it is the
    finding's place (with its file), elsewhere (an installed library) the message names it."""
    line, file, message = _user_line(error, recorder), None, f"{type(error).__name__}: {error}"
    if backward is not None:
        where, at = backward
        file = None if recorder.spans._is_user(where) else recorder.spans._own_file(where)
        if file is not None or recorder.spans._is_user(where):
            line = at
        else:
            message += f" (in the backward of {where}, line {at})"
    raised = UserCodeError(line, message, _why_unreal(error, recorder))
    raised.file = file
    raised.recording = recorder.recording
    return raised


_PROCESS_GROUP_LAYER = os.path.join("torch", "distributed", "")
_DTENSOR_LAYER = os.path.join("torch", "distributed", "tensor", "")


def _why_unreal(error: BaseException, recorder: Recorder) -> str | None:
    if not recorder.simulated:
        return None
    if recorder.read_unreal is not None:
        return recorder.read_unreal
    tb, last = error.__traceback__, None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    # torch.distributed's own argument checks (a ValueError such as a scatter_list off the source rank)
    # raise the same on real groups; anything else from that layer may be the simulated group's
    validation = isinstance(error, ValueError) and "world group map" not in str(error)
    if last is not None and _PROCESS_GROUP_LAYER in last and _DTENSOR_LAYER not in last and not validation:
        return "it was raised inside torch.distributed's process-group layer, which the simulated group stands in for"
    return None


def init_group(world: int, rank: int) -> None:
    map_cuda_to_cpu()
    if world == 1:
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    else:
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
        _subgroups_stay_simulated()
    _simulated_ddp()
    autograd_collectives_on_the_current_world()


_REAL_NEW_GROUP = dist.distributed_c10d.new_group


def autograd_collectives_on_the_current_world() -> None:
    """``torch.distributed.nn.functional`` (all_gather, all_reduce, reduce_scatter, all_to_all with
    their autograd) takes ``group=group.WORLD`` as a default, evaluated when the module is first
    imported: the world group of an earlier run, destroyed since ("not initialized in the world
    group map").  ``None`` means the default group to every c10d call they make."""
    import torch.distributed.nn.functional as autograd_collectives

    for function in vars(autograd_collectives).values():
        defaults = getattr(function, "__defaults__", None)
        if callable(function) and defaults and any(isinstance(d, dist.ProcessGroup) for d in defaults):
            function.__defaults__ = tuple(None if isinstance(d, dist.ProcessGroup) else d for d in defaults)


def _subgroups_stay_simulated() -> None:
    """A simulated rank has no peers: a subgroup asking for a real backend (Megatron builds gloo groups
    beside its NCCL ones) must stay on the fake group, or torch asserts on the fake store."""

    def new_group(*args, **kwargs):
        kwargs.pop("backend", None)
        kwargs.pop("pg_options", None)
        return _REAL_NEW_GROUP(*args, **kwargs)

    dist.new_group = dist.distributed_c10d.new_group = new_group


_REAL_DDP_INIT = torch.nn.parallel.DistributedDataParallel.__init__
SIMULATED_DDP: list = []   # DDP modules made in the current run (their use is stated as an assumption)


DDP_ASSUMPTION = ("DistributedDataParallel: the initial broadcast of rank 0's parameters is not simulated; every "
                  "rank is taken to build the same parameters (random draws are checked to be equal)")


def _simulated_ddp() -> None:
    """DDP as the recorder can follow it: no initial broadcast of rank 0's parameters (a write
    in C++ through buffers the recorder does not see; ``DDP_ASSUMPTION``), and on every run a
    communication hook doing DDP's default in Python: divide each gradient bucket by the group
    size, all-reduce it with a sum.

    The hook flattens the parameters' gradients itself instead of reading the bucket's buffer: the
    reducer copies each gradient into a view of that buffer in C++, through views the recorder never
    sees made when the model was wrapped outside the recording (an entry module's constructor), so
    the buffer would be read as a constant holding whatever numbers the run happened to compute.
    The one-device run takes the hook too (a group of one divides by 1): torch's own reducer would
    read that same buffer."""
    def hook(group, bucket):
        buffer = bucket.buffer()
        gradients = [p.grad for p in bucket.parameters()]
        if gradients and all(g is not None for g in gradients) \
                and sum(g.numel() for g in gradients) == buffer.numel():
            buffer = torch.cat([g.reshape(-1) for g in gradients])
        buffer.div_(dist.get_world_size(group))
        dist.all_reduce(buffer, group=group)
        future = torch.futures.Future()
        future.set_result(buffer)
        return future

    def init(self, *args, **kwargs):
        kwargs["init_sync"] = False
        _REAL_DDP_INIT(self, *args, **kwargs)
        self.register_comm_hook(self.process_group, hook)
        SIMULATED_DDP.append(self)

    torch.nn.parallel.DistributedDataParallel.__init__ = init


def teardown() -> None:
    package_state.reset()
    torch.nn.parallel.DistributedDataParallel.__init__ = _REAL_DDP_INIT
    SIMULATED_DDP.clear()
    dist.new_group = dist.distributed_c10d.new_group = _REAL_NEW_GROUP
    for state, real in _REAL_INITIALIZE.items():
        state.initialize_model_parallel = real
    _REAL_INITIALIZE.clear()
    REPLACED_STATES.clear()
    while PARALLEL_STATES:
        destroy = getattr(PARALLEL_STATES.pop(), "destroy_model_parallel", None)
        if callable(destroy):
            with contextlib.suppress(Exception):
                destroy()
    megatron_setup.reset()
    for state in _loaded_parallel_states():
        with contextlib.suppress(Exception):
            state.destroy_model_parallel()
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


def _loaded_parallel_states() -> list:
    """Every loaded module that keeps model-parallel groups of its own (megatron-core's
    ``parallel_state``, fairscale's ``model_parallel.initialize``, a package's ``mpu``): the user's
    code may have called its ``initialize_model_parallel`` itself, and the next simulated world
    must not find the last one's groups ("already initialized")."""
    found = []
    for name, loaded in list(sys.modules.items()):
        if loaded is None or name.split(".")[0] in _OWN_PACKAGES:
            continue
        destroy = getattr(loaded, "destroy_model_parallel", None)
        initialize = getattr(loaded, "initialize_model_parallel", None)
        if callable(destroy) and callable(initialize) and getattr(destroy, "__module__", None) == name:
            found.append(loaded)
    return found


def import_fresh(path: str, paths: tuple[str, ...] = ()):
    """The user's file as a new module.  A file inside a package is imported as ``package.module``
    from its import root (``location.py``): relative imports work and the package's own helpers are
    the real ones.  The package's modules are imported afresh each run unless it is an installed
    library (whose module-level state is the library's own; its parallel state is reset by
    ``teardown``); a script is imported under a private name."""
    where = locate(path, paths)
    if where.module is not None:
        if where.root not in sys.path:
            sys.path.insert(0, where.root)
        if not where.installed:
            _forget_modules_under(where.root)
            _forget_shadowed_package(where.module, where.root)
        module = importlib.import_module(where.module)
    else:
        name = f"_verify_agent_traced_{next(_MODULE_SERIAL)}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    library_rng_helpers()   # libraries the file imported reach the CUDA generator their own way
    return module


_OWN_PACKAGES = frozenset({"frontends", "verifier", "verify_agent", "agent", "tir_lifter"})


def _forget_modules_under(root: str) -> None:
    """Drop the modules imported from files under ``root`` so that the next import runs them again."""
    prefix = os.path.join(os.path.realpath(root), "")
    for name, loaded in list(sys.modules.items()):
        if name.split(".")[0] in _OWN_PACKAGES:   # this tool's modules, when the root holds them too
            continue
        # a namespace package has no file, only its directories (its old submodules are its attributes)
        origins = [getattr(loaded, "__file__", None)]
        with contextlib.suppress(Exception):   # torch.ops and the like answer any attribute
            origins += list(loaded.__path__) if type(loaded.__path__).__name__ == "_NamespacePath" else []
        if any(isinstance(origin, str) and os.path.realpath(origin).startswith(prefix) for origin in origins):
            del sys.modules[name]


def _forget_shadowed_package(module: str, root: str) -> None:
    """A checkout of a package that is also installed (a Megatron-LM tree beside megatron-core): modules
    of that package loaded from elsewhere (the installed copy, imported earlier in this process) are
    dropped, so the file's own imports (``megatron.core.tensor_parallel.layers``) are the checkout's."""
    top = module.split(".")[0]
    if top in _OWN_PACKAGES:
        return
    inside = os.path.join(os.path.abspath(root), top, "")
    mine = [name for name in sys.modules if name == top or name.startswith(top + ".")]
    elsewhere = [name for name in mine if isinstance(getattr(sys.modules[name], "__file__", None), str)
                 and not os.path.abspath(sys.modules[name].__file__).startswith(inside)]
    if elsewhere:
        for name in mine:
            del sys.modules[name]


def dtensor_region(tensor: Any, placements: Any = None) -> tuple[Region | None, str | None]:
    """The region of the global tensor this rank's local piece holds, from its placements."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    if not isinstance(tensor, DTensor):
        return None, None
    placements = tuple(tensor.placements if placements is None else placements)
    if any(p.is_partial() for p in placements):
        return None, f"placements {placements} hold partial sums"
    local_shape, offset = compute_local_shape_and_global_offset(tensor.shape, tensor.device_mesh, placements)
    return tuple((int(o), int(o) + int(s)) for o, s in zip(offset, local_shape)), None


def summed_partials(recorder: Recorder, tensor: Any, name: str, span: Span) -> tuple[str, tuple | None, str | None]:
    """A DTensor with ``Partial(sum)`` placements stands for the sum of the ranks' local values
    over those mesh dims (what ``full_tensor()`` computes): that sum is recorded as an
    ``all_reduce`` of the verifier's own after the user's ops.  (name, placements left, why not)."""
    from torch.distributed.tensor import DTensor, Replicate

    if not isinstance(tensor, DTensor) or not any(p.is_partial() for p in tensor.placements):
        return name, None, None
    placements = list(tensor.placements)
    coordinate = tensor.device_mesh.get_coordinate()
    for dim, placement in enumerate(placements):
        if not placement.is_partial():
            continue
        if getattr(placement, "reduce_op", "sum") != "sum":
            return name, None, f"placements {tensor.placements}: a partial {placement.reduce_op} is not modelled"
        index = list(coordinate)
        index[dim] = slice(None)
        group = [int(rank) for rank in tensor.device_mesh.mesh[tuple(index)].reshape(-1).tolist()]
        if len(group) > 1:
            summed = recorder.names.fresh()
            recorder.emit("all_reduce", [name], {"group": group, "op": "sum"}, [summed], span)
            name = summed
        placements[dim] = Replicate()
    return name, tuple(placements), None


def _local(tensor: Any) -> Any:
    from torch.distributed._functional_collectives import AsyncCollectiveTensor
    from torch.distributed.tensor import DTensor

    if isinstance(tensor, AsyncCollectiveTensor):
        tensor = tensor.wait()
    return tensor._local_tensor if isinstance(tensor, DTensor) else tensor


def _modules_of(obj: Any) -> list[tuple[str, torch.nn.Module]]:
    if isinstance(obj, torch.nn.Module):
        return [("", obj)]
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        return [("", owner)]
    found = []
    for cell in getattr(obj, "__closure__", None) or ():
        with contextlib.suppress(ValueError):
            if isinstance(cell.cell_contents, torch.nn.Module):
                found.append(("", cell.cell_contents))
    return found[:1]


# autograd nodes of views that keep a block of their input: the input's gradient is zero elsewhere
SLICING_BACKWARDS = frozenset({"SliceBackward0", "SplitBackward0", "SplitWithSizesBackward0", "SelectBackward0",
                               "UnbindBackward0", "NarrowBackward0"})


def _as_activations(tensors: list[Any], as_made: frozenset[int] = frozenset()) -> list[Any]:
    """What the entry is called with: each differentiable input as an activation (a recorded clone of
    its leaf), as training code hands it over; code that writes into its input in place (fairscale's
    ``_reduce`` all-reduces it and marks it dirty) may do so on an activation, never on a leaf.  The
    inputs at positions ``as_made`` are handed over as the leaves they are (``RunRequest.inputs_as_made``)."""
    return [t.clone() if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf and i not in as_made else t
            for i, t in enumerate(tensors)]


def made_trainable(tensors: list[Any], leaves: list[Leaf]) -> frozenset[int]:
    """Positions in ``tensors`` of the inputs ``example_inputs()`` created trainable (``_bind_leaves``
    binds one input leaf per tensor, in order)."""
    inputs = iter([leaf for leaf in leaves if leaf.kind == "input"])
    return frozenset(i for i, t in enumerate(tensors) if isinstance(t, torch.Tensor) and next(inputs).created_trainable)


def needs_leaf_inputs(error: BaseException) -> bool:
    """The code refused an activation where it accepts only a leaf: DTensor's ``distribute_tensor`` of
    an input ``example_inputs()`` made trainable (torchtitan-style drivers distribute their inputs)."""
    return "should be used to distribute leaf tensors" in str(error)


def _with_autograd_readers(leaves: list[Leaf], tensors: list[Any], outputs: list[Any],
                           passed: list[Any] | None = None) -> list[Leaf]:
    """Mark each input whose every consumer in the autograd graph of ``outputs`` is a slicing view (an
    input it has none of: a rank that reads none of it).

    Read from the graph torch built, not from the recorded ops: a custom Function that slices in its
    forward is one node whose backward may return anything (Megatron's scatter all-gathers).  An input
    handed over as a clone (``_as_activations``) is read by the consumers of its clone."""
    inputs = [t for t in tensors if isinstance(t, torch.Tensor)]
    handed = [t for t in (passed or tensors) if isinstance(t, torch.Tensor)]
    names = [leaf.name for leaf in leaves if leaf.kind == "input"]
    by_id = {id(t): name for name, t in zip(names, inputs)}
    by_node = {id(h.grad_fn): name for name, t, h in zip(names, inputs, handed)
               if h is not t and h.grad_fn is not None}
    readers: dict[str, set[str]] = {}
    seen, stack = set(), [t.grad_fn for t in outputs if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for next_node, _ in node.next_functions:
            variable = getattr(next_node, "variable", None) if next_node is not None else None
            if id(node) not in by_node and variable is not None and id(variable) in by_id:
                readers.setdefault(by_id[id(variable)], set()).add(type(node).__name__)
            if next_node is not None and id(next_node) in by_node:
                readers.setdefault(by_node[id(next_node)], set()).add(type(node).__name__)
            stack.append(next_node)
    return [replace(leaf, read_by_autograd_slices=True)
            if leaf.kind == "input" and readers.get(leaf.name, set()) <= SLICING_BACKWARDS else leaf
            for leaf in leaves]


def _flatten(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (tuple, list)):
        return [item for i, v in enumerate(value) for item in _flatten(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in _flatten(v, f"{path}[{k!r}]")]
    return []


def run_once(request: RunRequest, world: int, rank: int, reference: RunResult | None) -> RunResult:
    """Run the entry once, in a thread of its own; ``reference`` (the world-1 result) gives rank runs
    the global shapes.

    A fresh thread per run: DTensor caches sharding decisions per thread, keyed by a mesh hash that
    ignores the rank, so a run on the same thread would reuse an earlier run's mesh and coordinates."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["result"] = _run_once(request, world, rank, reference)
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target, name=f"traced-run-{world}-{rank}")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _run_once(request: RunRequest, world: int, rank: int, reference: RunResult | None) -> RunResult:
    init_group(world, rank)
    spans = SpanFinder(request.path, request.shown_as, request.paths)
    recorder = Recorder(spans, simulated=world > 1)
    harness.reset()
    try:
        torch.manual_seed(request.seed)
        if request.entry is None and is_launch_script(request.path):
            return _run_launch_script(request, recorder, world, rank)
        try:
            module = import_fresh(request.path, request.paths)
        except ImportError:
            raise
        except Exception as error:
            raise ModuleLevelError(f"{type(error).__name__}: {error}") from error
        constants = size_constants(module)
        apply_sizes(module, request.sizes)
        guard = None
        made = ParameterLines()
        if request.harness:   # the harness builds the entry and its inputs; its guard holds over the run
            with made.watching(spans):
                spec, target, names, inputs, guard = _from_harness(module, request, world)
            fn, mesh, frozen, stated = target, {"tp": world}, set(request.no_grad), {}
            call_fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
        else:
            spec = find_entry(module, request.entry)
            stated = styles.stated_layouts(getattr(module, spec.name)(*spec.args, **spec.kwargs)) \
                if spec.kind == "style" else {}
            try:
                with made.watching(spans):
                    target, mesh = _construct(module, spec, world, request.shapes, request.args)
                fn = target
                call_fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
                names, inputs = example_inputs(module, call_fn, request.shapes,
                                               forward_arguments(module, spec, request.args), world)
            except (EntryError, UserCodeError):
                raise
            except Exception as error:   # the arguments this tool chose did not build the entry
                if _tool_chose_arguments(module, spec) and not _ours(error):   # a bug of ours stays one
                    raise ArgumentsFailed(f"{type(error).__name__}: {error}") from error
                raise
            frozen = set(request.no_grad) | {names[i] for i in explicitly_not_trainable(module) if i < len(names)}
        spans.fallback = _definition_line(call_fn, module)
        vocab = getattr(module, "VOCAB", None)
        leaves, tensors = _bind_leaves(recorder, names, inputs, target, spans, reference,
                                       vocab if type(vocab) is int else None, frozen,
                                       blocks=({**stated, **request.layouts}, world, rank), made=made)
        fn, inference_said = without_inference_mode(fn)
        with guard.watch() if guard is not None else contextlib.nullcontext():
            try:
                result = _record(recorder, spec, fn, tensors, leaves, reference, world, rank, mesh, made,
                                 request.inputs_as_made)
            except UserCodeError as error:   # on inputs this tool chose, a harness may get past it
                error.tool_arguments = guard is None and not request.shapes and _tool_chose_arguments(module, spec) \
                    and not callable(getattr(module, "example_inputs", None))
                error.drawn = harness.drawn()
                raise
        result.assumptions += [inference_said] if inference_said else []
        result.constants = constants
        result.layouts = stated
        if stated:
            result.assumptions.append(f"{spec.name} states {', '.join(f'{k}={v}' for k, v in stated.items())} by its "
                                      f"own layouts: a rank takes or returns that block (--expect overrides)")
        result.assumptions[:0] = _where_it_ran(request)
        return result
    finally:
        teardown()


def _from_harness(module, request: RunRequest, world: int):
    """``(spec, entry, names, inputs, guard)`` built by the request's harness (``harness_file.py``) on this
    run's world, after the package's parallel state is set up as for any entry."""
    from .harness_file import build

    set_up_parallel_state(module, world)
    name, target, names, inputs, guard = build(module, request.harness, world, request.entry)
    spec = EntrySpec("module" if isinstance(target, torch.nn.Module) else "function", name)
    return spec, target, names, inputs, guard


def _where_it_ran(request: RunRequest) -> list[str]:
    """How the file was imported and which parallel state was set up for it (stated in the report)."""
    said = [locate(request.path, request.paths).describe()]
    launched = [s.__name__ for s in PARALLEL_STATES if s.__name__ not in REPLACED_STATES]
    if launched:
        said.append(f"parallel state set up as a launcher would: "
                    f"{', '.join(f'{name}.initialize_model_parallel' for name in launched)}(world size), "
                    f"every rank in one tensor-parallel group")
    said += [f"{name}.initialize_model_parallel: the code's own call set up the parallel sizes (the launcher's "
             f"set-up was undone first)" for name in dict.fromkeys(REPLACED_STATES)]
    said += package_state.SET_UP
    said += harness.built()
    said += megatron_setup.SEEDED[:1]
    return [line for line in said if line]


_ENTRY_FUNCTIONS = {"forward", "build", "example_inputs", "example_module"}
_LAUNCH_CALLS = {"init_process_group", "init_device_mesh"}


def is_launch_script(path: str) -> bool:
    """A torchrun-style script: module-level code sets up the process group or reads the launcher's
    environment (``RANK``, ``WORLD_SIZE``), and the file defines no entry function."""
    import ast

    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError, ValueError):
        return False
    if any(isinstance(node, ast.FunctionDef) and node.name in _ENTRY_FUNCTIONS for node in tree.body):
        return False
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if called in _LAUNCH_CALLS:
                    return True
            if isinstance(node, ast.Constant) and node.value in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                return True
    return False


def _run_launch_script(request: RunRequest, recorder: Recorder, world: int, rank: int) -> RunResult:
    """Run the script's module-level code as ``torchrun`` would on this rank; what it computes is
    the state it leaves: every module-level ``nn.Module``'s parameters and their gradients."""
    launcher = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    saved_env = {name: os.environ.get(name) for name in launcher}
    saved_init, saved_destroy = dist.init_process_group, dist.destroy_process_group
    os.environ.update(launcher)
    dist.init_process_group = lambda *args, **kwargs: None      # the group is already set up
    dist.destroy_process_group = lambda *args, **kwargs: None   # and is torn down by the runner
    collectives.ACTIVE.append(recorder)
    made = ParameterLines()
    try:
        with recorder, made.watching(recorder.spans):
            try:
                module = import_fresh(request.path, request.paths)
            except Exception as error:
                if _ours(error):
                    raise
                _note_made_lines(recorder, made)
                raise _raised(error, recorder) from error
    finally:
        collectives.ACTIVE.remove(recorder)
        dist.init_process_group, dist.destroy_process_group = saved_init, saved_destroy
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    values = _module_state(recorder, module)
    if not values:
        raise UserCodeError(None, "the launch script leaves no nn.Module at module level: nothing to compare")
    passes = ("forward", "backward") if any(v.kind == "gradient" for v in values) else ("forward",)
    assumptions = ["launch script: its module-level code was run as torchrun would on each rank; compared are "
                   "the parameters of its module-level modules after the script, and their gradients"]
    if SIMULATED_DDP:
        assumptions.append(DDP_ASSUMPTION)
    return RunResult(world, rank, recorder.recording, [], values, passes, assumptions, {"tp": world})


def _note_made_lines(recorder: Recorder, made: ParameterLines) -> None:
    """The lines that made the parameters a launch script's ops read (their parallel style's, when a style
    distributed them), for a rank that raised: its sharding propagation is named where they were chosen."""
    for param, span in made.made():
        name = recorder.names.current(_local(param))
        if name is not None and span.line is not None:
            recorder.recording.made_lines.setdefault(name, span.line)


def _module_state(recorder: Recorder, module) -> list[Value]:
    span = Span(None, recorder.spans.shown_as)
    values = []
    for holder, obj in vars(module).items():
        model = getattr(obj, "module", obj) if isinstance(obj, torch.nn.Module) else None
        if not isinstance(model, torch.nn.Module) or not list(model.parameters()):
            continue
        for pname, param in model.named_parameters():
            full = f"{holder}.{pname}"
            for label, kind, tensor in ((f"parameter {full} after the script", "output", param),
                                        (f"gradient of {full} after the script", "gradient", param.grad)):
                if tensor is None:
                    continue
                region, why = dtensor_region(tensor)
                if why:
                    recorder.problem(span, f"{label}: {why}")
                local = _local(tensor)
                values.append(Value(label, kind, f"{kind}:{full}", recorder.name_of(local, span),
                                    tuple(tensor.shape), region, span))
    return values


def _definition_line(fn: Any, module) -> int | None:
    fn = getattr(fn, "__wrapped__", fn)   # an autograd Function's ``apply``: its ``forward``
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None and code.co_filename == module.__file__:
        return code.co_firstlineno
    return None


def _construct(module, spec: EntrySpec, world: int, shapes: dict | None = None, args: dict | None = None
               ) -> tuple[Any, dict[str, int]]:
    if spec.kind == "build":
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
        return getattr(module, "build")(mesh), {"tp": world}
    if spec.name != "example_module":
        set_up_parallel_state(module, world)
    if spec.kind == "module":
        return construct_module(module, spec, world, shapes), {"tp": world}
    if spec.kind == "style":
        return construct_style(module, spec, world, shapes), {"tp": world}
    if spec.kind == "transform":
        return construct_transformed(module, spec, world, shapes, args), {"tp": world}
    return entry_function(module, spec.name), {"tp": world}


PARALLEL_STATES: list = []   # the modules whose parallel state this run set up (torn down after it)


def set_up_parallel_state(module, world: int) -> list[str]:
    """As a launcher would before the code runs: ``initialize_model_parallel(world)`` of megatron-core's
    ``parallel_state`` when it is loaded, and of the entry's own package's process-group module (an
    ``mpu`` or ``parallel_state`` of its own: fairscale, gpt-neox, Megatron-DeepSpeed keep one), all
    ranks in one tensor-parallel group.  Returns the names of the modules set up."""
    done = []
    for state in _parallel_states(module):
        initialized = getattr(state, "model_parallel_is_initialized", None)
        if callable(initialized) and initialized():
            continue
        try:
            state.initialize_model_parallel(world)
        except Exception as error:
            raise UserCodeError(None, f"{state.__name__}.initialize_model_parallel({world}), run as a launcher "
                                      f"would, raised {type(error).__name__}: {error}") from error
        PARALLEL_STATES.append(state)
        done.append(state.__name__)
        _yield_to_the_codes_own(state)
    try:   # packages whose parallel state has no initialize_model_parallel (deepspeed's groups)
        package_state.set_up(module, world)
    except Exception as error:
        raise UserCodeError(None, f"setting up the package's process groups as a launcher would raised "
                                  f"{type(error).__name__}: {error}") from error
    return done


REPLACED_STATES: list[str] = []   # parallel states the code initialised itself, replacing the launcher's
_REAL_INITIALIZE: dict = {}       # state module -> its own initialize_model_parallel (restored by teardown)


def _yield_to_the_codes_own(state) -> None:
    """The code's own ``initialize_model_parallel(...)`` (a training script sets up its parallel sizes
    itself) replaces the launcher's set-up instead of raising "already initialized": the launcher's
    groups are destroyed first, as if it had not run.  Undone by ``teardown``."""
    real = state.initialize_model_parallel

    def initialize(*args, **kwargs):
        state.initialize_model_parallel = real
        state.destroy_model_parallel()
        REPLACED_STATES.append(state.__name__)
        return real(*args, **kwargs)

    state.initialize_model_parallel = initialize
    _REAL_INITIALIZE[state] = real


def _parallel_states(module) -> list:
    found = [sys.modules["megatron.core.parallel_state"]] if "megatron.core.parallel_state" in sys.modules else []
    package = (getattr(module, "__package__", None) or "").split(".")[0]
    if not package:
        return found
    for name, loaded in sorted(sys.modules.items()):
        if loaded is None or not (name == package or name.startswith(package + ".")):
            continue
        initialize = getattr(loaded, "initialize_model_parallel", None)
        if callable(initialize) and getattr(initialize, "__module__", None) == name and loaded not in found:
            found.append(loaded)
    return found


def _bind_leaves(recorder: Recorder, names, inputs, target, spans: SpanFinder,
                 reference: RunResult | None, bounds_hint: int | None = None,
                 frozen: set[str] = frozenset(), blocks: tuple = ({}, 1, 0),
                 made: ParameterLines | None = None) -> tuple[list[Leaf], list[Any]]:
    """Every floating input and parameter is differentiable unless ``frozen`` names it (``--no-grad``,
    or ``requires_grad=False`` written in ``example_inputs()``): an entry's inputs are activations
    whose gradients flow on to earlier layers.  A parameter the code itself froze stays frozen.
    ``blocks``: (statements, world, rank); an input stated ``Shard(d)`` (``--expect x=Shard(1)``) is
    given to a rank as its block r of dim d, cut from the single-device value."""
    leaves, tensors = [], []
    for name, value in zip(names, inputs):
        if not isinstance(value, torch.Tensor):
            tensors.append(value)
            continue
        block = input_block(name, value, *blocks) if reference is not None else None
        if block is not None:
            leaf, tensor = _bind_block(recorder, name, value, block, spans, name not in frozen)
            leaves.append(leaf)
            tensors.append(tensor)
            continue
        tensor = value.detach().clone()
        trainable = tensor.is_floating_point() and name not in frozen
        if trainable:
            tensor.requires_grad_(True)
        recorder.bind_leaf(tensor, name, Span(spans.fallback, spans.shown_as))
        if not tensor.is_floating_point() and tensor.dtype != torch.bool:
            _bound_integer_leaf(recorder, tensor, name, bounds_hint)
        leaves.append(Leaf(name, name, tuple(tensor.shape), tuple(tensor.shape), trainable, "input",
                           created_trainable=bool(value.requires_grad)))
        tensors.append(tensor)
    for prefix, mod in _modules_of(target):
        for pname, param in mod.named_parameters():
            full = prefix + pname
            if full in frozen:
                param.requires_grad_(False)
            local = _local(param)
            recorder.recording.parameters[full] = _values_as_built(local)
            region, why = dtensor_region(param)
            local_name = full if reference is None else f"{full}@local"
            recorder.names.bind(local, local_name)
            if reference is None:
                recorder.recording.leaves.append(_spec(full, local))
            megatron = None
            if getattr(param, "tensor_model_parallel", False):
                megatron = (int(getattr(param, "partition_dim", -1)), int(getattr(param, "partition_stride", 1)))
            source = "dtensor" if region is not None else None
            if why:
                recorder.problem(Span(None), f"parameter {full}: {why}")
            leaves.append(Leaf(full, local_name, tuple(param.shape), tuple(local.shape), param.requires_grad,
                               "parameter", region, source, megatron,
                               made=made.of(param) if made is not None else Span()))
            if leaves[-1].made.line is not None:
                recorder.recording.made_lines[local_name] = leaves[-1].made.line
    unknown = set(frozen) - {leaf.name for leaf in leaves} - set(names)
    if unknown:
        raise EntryError(f"--no-grad {', '.join(sorted(unknown))}: no input or parameter of that name "
                         f"(inputs: {', '.join(names) or 'none'})")
    return leaves, tensors


def input_block(name: str, value: Any, statements: dict, world: int, rank: int) -> Region | None:
    """The block of input ``name`` a rank is given when it is stated ``Shard(d)``; None: the whole."""
    from .correspondence import rank_block, stated_shard_dim

    dim = stated_shard_dim(statements.get(name), value.dim())
    if dim is None:
        return None
    size = int(value.shape[dim])
    if size % world:
        raise EntryError(f"--expect {name}={statements[name]}: dim {dim} of size {size} does not split into "
                         f"{world} blocks")
    return rank_block(tuple(value.shape), dim, rank, world)


def _bind_block(recorder: Recorder, name: str, value: Any, block: Region, spans: SpanFinder,
                trainable: bool) -> tuple[Leaf, Any]:
    """A rank's block of an input: a leaf of its own (``name@local``) related to the single-device
    input by the block, the way a parameter's piece is."""
    index = tuple(slice(a, b) for a, b in block)
    tensor = value.detach()[index].clone()
    trainable = trainable and tensor.is_floating_point()
    if trainable:
        tensor.requires_grad_(True)
    local_name = f"{name}@local"
    recorder.names.bind(tensor, local_name)
    dims = [d for d, (a, b) in enumerate(block) if b - a != int(value.shape[d])]
    sentence = (f"input {name}: each rank is given its block of dim {dims[0]} (as stated by --expect or by the "
                f"entry's own layouts), and the outputs and gradients are compared block by block" if dims else None)
    if sentence and sentence not in recorder.recording.assumptions:
        recorder.recording.assumptions.append(sentence)
    return Leaf(name, local_name, tuple(value.shape), tuple(tensor.shape), trainable, "input", block, "user"), tensor


def _values_as_built(tensor: Any) -> Any:
    """A parameter's numbers before the code runs (NumPy; floats widened exactly to float64): the
    correspondence finds each rank's piece among the single-device parameter's by these."""
    try:
        values = tensor.detach()
        if values.is_floating_point():
            values = values.to(torch.float64)
        return values.contiguous().cpu().numpy().copy()
    except Exception:   # a tensor without storage (meta, fake): no values, no layout shown
        return None


SENTINEL_VALUES = 4  # at most this many distinct negative values recorded are taken as sentinels


def _bound_integer_leaf(recorder: Recorder, tensor: Any, name: str, vocab: int | None) -> None:
    """Token ids and labels: values in [0, VOCAB) when the file names VOCAB and the recorded values
    fit, else the recorded range; a few negative values the recorded inputs hold (a label's padding
    value -100) stay possible values of their own, not a range reaching down to them."""
    spec = recorder.recording.leaves[-1]
    values = sorted(int(v) for v in tensor.unique().tolist()) if tensor.numel() else [0]
    sentinels = tuple(v for v in values if v < 0)
    if not sentinels or len(sentinels) > SENTINEL_VALUES or len(sentinels) == len(values):
        sentinels = ()
    counted = [v for v in values if v not in sentinels]
    if vocab is not None and 0 <= counted[0] and counted[-1] < int(vocab):
        bounds, source = (0, int(vocab)), "(VOCAB)"
    else:
        bounds, source = (counted[0], counted[-1] + 1), "as in the recorded inputs"
    also = (f" or {', '.join(map(str, sentinels))} (a value the recorded inputs hold outside that range)"
            if sentinels else "")
    recorder.recording.assumptions.append(f"integer input {name} takes values in [{bounds[0]}, {bounds[1]}) "
                                          f"{source}{also}")
    recorder.recording.leaves[-1] = replace(spec, bounds=bounds, extra_values=sentinels)


def _spec(name: str, tensor: Any):
    from verifier.ir import TensorSpec

    from .recorder import spec_dtype

    return TensorSpec(name, tuple(tensor.shape), spec_dtype(tensor.dtype))


def _record(recorder: Recorder, spec: EntrySpec, fn, tensors, leaves: list[Leaf], reference: RunResult | None,
            world: int, rank: int, mesh: dict[str, int], made: ParameterLines | None = None,
            inputs_as_made: bool = False) -> RunResult:
    assumptions: list[str] = []
    not_run: dict[str, str] = {}
    as_made = made_trainable(tensors, leaves) if inputs_as_made else frozenset()
    collectives.ACTIVE.append(recorder)
    anomaly = torch.autograd.set_detect_anomaly(True, check_nan=False)
    try:
        with anomaly, recorder, FollowDataAssignment(recorder):
            passed = _as_activations(tensors, as_made)
            lines = LineTrace(recorder.spans)
            returned = _ReturnLine(fn, recorder.spans, lines)
            try:
                with lines, returned, module_lines(recorder, made):
                    recorder.lines = lines
                    lines.namer = recorder.value_name
                    out = fn(*passed)
            except Exception as error:  # the user's code raised: say where
                if _ours(error):
                    raise
                raise _raised(error, recorder) from error
            flat = _flatten(out)
            values, loss_terms = [], []
            for index, (path, tensor) in enumerate(flat):
                values.append(_output_value(recorder, index, path, tensor, returned.line, returned.bound(tensor)))
            leaves[:] = _with_autograd_readers(leaves, tensors, [t for _, t in flat], passed)
            passes = ("forward",)
            for index, (path, tensor) in enumerate(flat):
                if not (isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.requires_grad):
                    continue
                term = _loss_term(recorder, index, tensor, values[index], leaves, reference)
                if term is not None:
                    loss_terms.append(term)
            if loss_terms:
                loss = loss_terms[0]
                for term in loss_terms[1:]:
                    loss = loss + term
                recorded_so_far = len(recorder.recording.ops)
                returns = BackwardReturns(_handed_back_to(recorder), recorder.value_name)
                try:
                    with returns:
                        loss.backward()
                    passes = ("forward", "backward")
                except Exception as error:
                    if _ours(error):
                        raise
                    line = _user_line(error, recorder)
                    backward = raising_backward(error) or returns.rejected(error)
                    if line is not None or backward is not None or _custom_backward_failed(error):
                        # the user's own backward code raised, or a custom Function's backward (the
                        # code's or a library's) raised or returned a gradient autograd rejects: the
                        # program's backward is broken, not the tool's
                        raise _raised(error, recorder, backward) from error
                    # torch refused the backward this tool added outside the user's context (e.g. a
                    # loss_parallel() block): forward only, and the verdict says so
                    del recorder.recording.ops[recorded_so_far:]
                    assumptions.append(f"the backward pass added by the tool could not run outside the code's "
                                       f"own context ({type(error).__name__}); gradients are not checked")
                    not_run["backward"] = (f"the backward the tool added raised outside the code's own context: "
                                           f"{type(error).__name__}; gradients not checked")
                if passes == ("forward", "backward"):
                    _finalize_megatron_grads(fn, assumptions)
            else:
                # no output to differentiate, but the code may have run its own backward (a training
                # step): the gradients it left are its result too, as the ground truth compares them, on
                # its parameters and on the inputs it made trainable (a step's other inputs are its data)
                leaves[:] = [replace(leaf, requires_grad=False) if leaf.kind == "input" and not leaf.created_trainable
                             else leaf for leaf in leaves]
                if _left_gradients(recorder, leaves, tensors, fn):
                    passes = ("forward", "backward")
                    assumptions.append("the code ran its own backward pass: the gradients it left on the parameters "
                                       "and on the inputs made trainable in example_inputs() are compared")
            for leaf in leaves:
                if passes == ("forward",) or leaf.kind == "cotangent" or not leaf.requires_grad:
                    continue
                values.append(_gradient_value(recorder, leaf, tensors, fn))
    finally:
        collectives.ACTIVE.remove(recorder)
    trained = [leaf.name for leaf in leaves if leaf.kind == "input" and leaf.requires_grad]
    if trained and passes == ("forward", "backward"):
        assumptions.append(f"inputs {', '.join(trained)} are differentiable: in training code an entry's inputs "
                           f"are activations whose gradients flow on, so their gradients are compared "
                           f"(--no-grad NAME, or requires_grad=False in example_inputs(), says otherwise)")
    if SIMULATED_DDP:
        assumptions.append(DDP_ASSUMPTION)
    if as_made:
        assumptions.append("the inputs example_inputs() made trainable are handed over as the leaves it made, not as "
                           "activations: the code accepts only leaves (DTensor's distribute_tensor)")
    return RunResult(world, rank, recorder.recording, leaves, values, passes, assumptions, mesh, not_run=not_run,
                     inputs_as_made=inputs_as_made)


def _handed_back_to(recorder: Recorder):
    """Records, on ``recorder``, a gradient a custom Function's backward returns as it was handed it, with
    the line of that ``return`` (of the checked file or the user's own package)."""
    def unchanged(tensor, frame) -> None:
        name, span = recorder.value_name(tensor), recorder.spans.of_frame(frame)
        if name is not None and span is not None:
            recorder.recording.handed_back.setdefault(name, span)
    return unchanged


def _ours(error: BaseException) -> bool:
    """The exception was raised by the recorder itself (a bug of ours, not the user's)."""
    tb, last = error.__traceback__, None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and os.path.dirname(os.path.abspath(last)) == os.path.dirname(os.path.abspath(__file__))


def _custom_backward_failed(error: BaseException) -> bool:
    """Autograd's check of what a custom Function's ``backward`` returned (wrong shape, dtype, count)."""
    text = str(error)
    return isinstance(error, RuntimeError) and text.startswith("Function ") and (
        "returned an invalid gradient" in text or "returned an incorrect number of gradients" in text)


def _user_line(error: BaseException, recorder: Recorder) -> int | None:
    tb = error.__traceback__
    line = None
    while tb is not None:
        if recorder.spans._is_user(tb.tb_frame.f_code.co_filename):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class _ReturnLine:
    """The line of the ``return`` that ended the entry (when the entry is the user's file's code): where
    its outputs are handed back, so where a reduction the outputs miss belongs.  A trace function on
    this thread that follows the entry's own frame only (other frames are not traced)."""

    def __init__(self, fn: Any, spans: SpanFinder, lines: LineTrace | None = None) -> None:
        code = getattr(getattr(fn, "forward", fn) if isinstance(fn, torch.nn.Module) else fn, "__code__", None)
        self._code = code if code is not None and spans._is_user(code.co_filename) else None
        self.line: int | None = None
        self._lines = lines   # a line trace already following the entry's frame: read it there

    def bound(self, value: Any) -> tuple[str, int] | None:
        """The name the entry's ``return`` handed ``value`` back under and the earlier line that bound it."""
        if self._code is None or self._lines is None:
            return None
        return self._lines.returned_by(self._code, value)

    def _global(self, frame, event, arg):
        return self._local if frame.f_code is self._code else None

    def _local(self, frame, event, arg):
        if event == "return":
            self.line = frame.f_lineno
        return self._local

    def __enter__(self):
        self._previous = sys.gettrace()
        self._traced_here = self._code is not None and self._previous is None
        if self._traced_here:
            sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        if self._traced_here:
            sys.settrace(None)
        elif self._code is not None and self._lines is not None and self._lines.active:
            self.line = self._lines.returned.get(self._code, (None, []))[0]
        return False


def _output_value(recorder: Recorder, index: int, path: str, tensor: Any, returned: int | None = None,
                  bound: tuple[str, int] | None = None) -> Value:
    region, why = dtensor_region(tensor)
    local = _local(tensor)
    span = recorder.spans.span()
    if returned is not None:
        span = Span(returned, span.file)
    if why:
        recorder.problem(span, f"output {index}: {why}")
    name = recorder.name_of(local, span)
    if returned is not None and bound is not None:   # the name returned, bound on an earlier line
        span = replace(span, bound=((name, *bound),))
    return Value(f"output {index}{path}", "output", f"output {index}", name, tuple(tensor.shape), region, span)


def _loss_term(recorder: Recorder, index: int, tensor: Any, value: Value | None, leaves: list[Leaf],
               reference: RunResult | None):
    """``sum(out * cotangent)`` over this rank's piece, the cotangent a leaf of the global shape."""
    name = f"cotangent{index}"
    global_shape = tuple(tensor.shape)
    if reference is not None:
        global_shape = _reference_shape(reference, value.key) or global_shape
    from torch.distributed.tensor import DTensor

    if isinstance(tensor, DTensor):  # the whole output on every rank, gathered through autograd
        local, value = tensor.full_tensor(), None
    else:
        local = tensor
    recorder.paused = True
    try:
        generator = torch.Generator().manual_seed(7919 + index)
        cotangent = torch.randn(global_shape, generator=generator, dtype=tensor.dtype)
        if reference is None:
            recorder.bind_leaf(cotangent, name, Span(None))
            piece, region = cotangent, None
        elif value is None:
            piece, region = cotangent, None
            recorder.names.bind(piece, f"{name}@local")
        else:
            region = value.region or _shape_region(_reference_shape(reference, value.key), tuple(local.shape),
                                                   dist.get_world_size(), recorder)
            if region is None:
                return None  # the piece cannot be told: the output comparison says so, no backward
            piece = cotangent[tuple(slice(a, b) for a, b in region)]
            recorder.names.bind(piece, f"{name}@local")
    finally:
        recorder.paused = False
    shape = tuple(piece.shape)
    leaves.append(Leaf(name, name if reference is None else f"{name}@local", global_shape, shape, False,
                       "cotangent", region, "output"))
    return (local * piece).sum()


def _reference_shape(reference: RunResult, key: str) -> tuple[int, ...] | None:
    for value in reference.values:
        if value.key == key:
            return value.shape
    return None


def _shape_region(global_shape, local_shape, world: int, recorder: Recorder | None) -> Region | None:
    """A plain tensor: the whole value, or this rank's contiguous chunk of the one dim that shrank."""
    if global_shape is None or len(global_shape) != len(local_shape):
        return None
    if tuple(global_shape) == tuple(local_shape):
        return tuple((0, int(n)) for n in global_shape)
    shrunk = [d for d, (g, l) in enumerate(zip(global_shape, local_shape)) if g != l]
    if len(shrunk) != 1:
        return None
    d = shrunk[0]
    if local_shape[d] * world != global_shape[d]:
        return None
    rank = dist.get_rank()
    return tuple((rank * local_shape[d], (rank + 1) * local_shape[d]) if i == d else (0, int(n))
                 for i, n in enumerate(global_shape))


def _left_gradients(recorder: Recorder, leaves: list[Leaf], tensors, fn) -> bool:
    """Some trainable input or parameter holds a gradient after the entry returned."""
    for leaf in leaves:
        if leaf.kind != "cotangent" and leaf.requires_grad:
            tensor = _leaf_tensor(recorder, leaf, tensors, fn)
            if tensor is not None and tensor.grad is not None:
                return True
    return False


def _gradient_value(recorder: Recorder, leaf: Leaf, tensors, fn) -> Value:
    """A parameter's gradient is named at the line that made the parameter (where a reduction it misses
    is marked), an input's at the entry."""
    tensor = _leaf_tensor(recorder, leaf, tensors, fn)
    span = leaf.made if leaf.made.line is not None else Span(recorder.spans.fallback, recorder.spans.shown_as)
    grad = None if tensor is None else tensor.grad
    if grad is None:
        return Value(f"gradient of {leaf.name}", "gradient", leaf.name, None, leaf.local_shape, leaf.region, span)
    local = _local(grad)
    name, placements, why = summed_partials(recorder, grad, recorder.name_of(local, span), span)
    if placements is not None:
        recorder.recording.assumptions.append(
            f"gradient of {leaf.name}: placements {grad.placements} hold partial sums; compared as their sum over "
            f"the mesh (what full_tensor() gives), an all-reduce the verifier adds after your code")
    if why is None:
        region, why = dtensor_region(grad, placements)
    if why:
        recorder.problem(span, f"gradient of {leaf.name}: {why}")
        region = None
    return Value(f"gradient of {leaf.name}", "gradient", leaf.name, name, tuple(local.shape),
                 region or leaf.region, span)


def _leaf_tensor(recorder: Recorder, leaf: Leaf, tensors, fn):
    if leaf.kind == "input":
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor) and recorder.names.lookup(tensor) is not None \
                    and recorder.names.lookup(tensor).name == leaf.local:   # a rank's block: name@local
                return tensor
        return None
    moved = None
    for prefix, mod in _modules_of(fn):
        for pname, param in mod.named_parameters():
            if prefix + pname == leaf.name:
                return param
            bound = recorder.names.lookup(_local(param)) if moved is None else None
            if bound is not None and bound.name == leaf.local:
                moved = param
    # the parameter under another name now (transformers' RowwiseParallel moves a bias to ``_bias``
    # when its hook first runs and adds it after the all-reduce): the tensor bound to the leaf
    return moved


def _finalize_megatron_grads(fn, assumptions: list[str]) -> None:
    """Megatron's gradient finalisation all-reduces ``sequence_parallel`` parameters' gradients."""
    state = sys.modules.get("megatron.core.parallel_state")
    if state is None or not state.model_parallel_is_initialized():
        return
    marked = [param for _, mod in _modules_of(fn) for _, param in mod.named_parameters()
              if getattr(param, "sequence_parallel", False) and param.grad is not None]
    for param in marked:
        dist.all_reduce(param.grad, group=state.get_tensor_model_parallel_group())
    if marked:
        assumptions.append("gradients of parameters marked sequence_parallel are all-reduced over the "
                           "tensor-parallel group, as Megatron's gradient finalisation does")


__all__ = ["Leaf", "Value", "RunResult", "RunRequest", "UserCodeError", "run_once", "Problem"]
