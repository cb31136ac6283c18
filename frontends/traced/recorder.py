"""Record every op torch dispatches while the user's code runs: a ``TorchDispatchMode``.

Each aten op becomes an IR ``Op`` named exactly as torch prints its overload
(``aten.mm.default``): ``args`` are the SSA names of its tensor arguments in schema order
(tensor lists flattened, their lengths in ``attrs["list_lengths"]``), ``attrs`` every other
schema argument by name (dtypes as strings such as ``"float32"``; an optional tensor given as
``None`` is ``attrs[name] = None``), ``results`` one name per tensor output (``None`` outputs
get no name and ``attrs["result_mask"]`` says which positions exist).  Collectives are
normalised by ``collectives.py``.

Soundness guards:

* a tensor read whose ``_version`` moved since its name was recorded changed behind the
  recorder's back: writes through a recorded view are written back to the base
  (``slice_scatter``-style ops), stale views are re-derived from their base, anything else is
  ``unsupported`` naming the line;
* a 0-dim tensor made outside the recording (a python scalar torch wrapped) becomes an
  ``aten.scalar_tensor.default`` record with its value; a small constant tensor becomes
  scalar records stacked and reshaped; a large one becomes a leaf whose values must be the same
  in every run (``to_ir`` checks the fingerprint);
* reading tensor values into Python (``.item()``, ``bool(t)``, data-dependent shapes) is an
  assumption ("the path taken for the recorded inputs") when the values are real, and
  ``unsupported`` when they descend from a simulated collective (the fake process group
  computes no real values).
"""
from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode

from verifier.ir import Op, Span, TensorSpec

from . import fake_group, replay
from .cuda_standin import generator_bookkeeping
from .names import NameTable
from .spans import SpanFinder

RANDOM_FACTORIES = {
    "aten.randn.default", "aten.randn.generator", "aten.rand.default", "aten.rand.generator",
    "aten.randint.default", "aten.randint.low", "aten.randint.generator", "aten.randint.low_generator",
    "aten.randn_like.default", "aten.rand_like.default", "aten.randint_like.default",
    "aten.randint_like.low_dtype", "aten.randperm.default", "aten.normal_.default", "aten.uniform_.default",
    "aten.bernoulli.default", "aten.bernoulli_.float", "aten.bernoulli_.Tensor", "aten.exponential_.default",
    "aten.random_.default", "aten.random_.from", "aten.random_.to", "aten.multinomial.default",
    "aten.normal.Tensor_float", "aten.normal.float_Tensor", "aten.normal.Tensor_Tensor",
    "aten.normal.float_float",
}
DATA_DEPENDENT = {
    "aten._local_scalar_dense.default", "aten.is_nonzero.default", "aten.equal.default", "aten.item.default",
    "aten.nonzero.default", "aten.nonzero_static.default", "aten.masked_select.default", "aten.unique_dim.default",
    "aten._unique2.default", "aten.unique_consecutive.default", "aten.allclose.default",
    "aten.repeat_interleave.Tensor", "aten.bincount.default",
}
# data-dependent ops whose first dim's size the values decide (the rule takes the recorded one)
SIZED_BY_VALUES = frozenset({"aten.nonzero.default", "aten.bincount.default", "aten.repeat_interleave.Tensor"})
# ops whose integer result says which elements were selected (by value): output position of the indices
SELECTIONS = {"aten.argmax.default": 0, "aten.argmin.default": 0, "aten.max.dim": 1, "aten.min.dim": 1,
              "aten.topk.default": 1, "aten.sort.default": 1, "aten.sort.stable": 1}
SHARED_COUNTER = frozenset({"aten.detach.default", "aten.alias.default"})   # aliases that are views
ALIASES = {"aten.detach.default", "aten.alias.default", "aten.lift_fresh.default",
           "_c10d_functional._wrap_tensor_autograd.default"}
SMALL_CONSTANT = 64          # elements: spelled out as scalar records
FOLDED_CONSTANT = 1 << 14    # ... when the recorder folds constants (a reference re-run at reduced sizes)
# ops recorded as their values when every tensor they read is a small constant
FOLDED_ON_CONSTANTS = frozenset({"aten.as_strided.default", "aten.nonzero.default"})
CONSTANT_FACTORIES = frozenset({"aten.arange.default", "aten.arange.start", "aten.arange.start_step",
                                "aten.zeros.default", "aten.ones.default", "aten.full.default",
                                "aten.scalar_tensor.default"})
SCALAR_WRITE_BACK = {        # view op -> how a write into the view reaches its base
    "aten.slice.Tensor": "aten.slice_scatter.default",
    "aten.select.int": "aten.select_scatter.default",
    "aten.diagonal.default": "aten.diagonal_scatter.default",
    "aten.as_strided.default": "aten.as_strided_scatter.default",
}


@dataclass(frozen=True)
class Problem:
    """Why this recording cannot be trusted: said with the user's line."""

    span: Span
    message: str


@dataclass(frozen=True)
class ViewOrigin:
    base: Any
    kind: str
    attrs: dict


@dataclass(frozen=True)
class FailedOp:
    """The op torch refused (it raised in the dispatcher): its kind, the names of its tensor operands
    (None for one the recorder never named) and the line it ran at."""

    kind: str
    args: tuple[str | None, ...]
    span: Span


@dataclass
class Recording:
    """What one run did (mutable while it runs; ``to_ir`` turns it into IR)."""

    ops: list[Op] = field(default_factory=list)
    leaves: list[TensorSpec] = field(default_factory=list)
    fingerprints: dict[str, str] = field(default_factory=dict)
    drawn: dict[str, Any] = field(default_factory=dict)      # random draw -> the numbers drawn (NumPy)
    parameters: dict[str, Any] = field(default_factory=dict)  # parameter -> this run's piece as built (NumPy)
    problems: list[Problem] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)   # value name -> shape (from torch)
    failed: FailedOp | None = None   # the last op torch raised on (where a run that raised stopped)
    subclass_op: FailedOp | None = None   # the last op a tensor subclass (DTensor) was asked to run
    made_lines: dict[str, int] = field(default_factory=dict)   # a parameter's piece -> the line that made it
    # (first op, end op, line that built it) of each installed module's forward run (module_lines.py)
    module_lines: list[tuple[int, int | None, int]] = field(default_factory=list)
    read_collective: bool = False    # a simulated rank read values a simulated collective computed (replay.py)
    read_into_python: bool = False   # ... into Python (.item(), .tolist()): later sizes may come from them
    # a selection's indices (argmax, topk, sort) -> (numbers, dtype, line, occurrence on that line) (steering.py)
    selections: dict[str, tuple[Any, str, Span, int]] = field(default_factory=dict)
    steering: dict[str, int] = field(default_factory=dict)   # ... whose values reach Python: -> the reading line
    # a gradient a custom Function's backward handed back as it was handed it (the same tensor) -> the span of
    # that backward's ``return``, when it is code of the checked file or of the user's own package
    handed_back: dict[str, Span] = field(default_factory=dict)
    # a tensor a custom Function's forward (or a function it calls) returned as it was given it (the same
    # tensor, the same value) -> (the span of the line after which the reduction goes, before the innermost
    # such ``return``; that ``return``'s line in the same file) (forward_returns.py)
    forward_handed_back: dict[str, tuple[Span, int]] = field(default_factory=dict)


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def spec_dtype(dtype: Any) -> str:
    """The verifier's short dtype names (``f32``, ``i64``, ``bool``)."""
    text = dtype_name(dtype)
    if text == "bool":
        return "bool"
    if text.startswith("int") or text.startswith("uint"):
        return "i" + text.lstrip("uint")
    if text.startswith("float"):
        return "f" + text[len("float"):]
    if text in ("bfloat16", "half"):
        return "f16"
    return text


def plain(value: Any) -> Any:
    """A non-tensor argument as a plain python value."""
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.hint if hasattr(value.node, "hint") else int(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, torch.Size):
        return list(value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, torch.Generator):
        return None
    return repr(value)


def _is_tensor_type(schema_type: Any) -> bool:
    text = str(schema_type)
    return text in ("Tensor", "Optional[Tensor]", "Tensor?")


def _is_tensor_list_type(schema_type: Any) -> bool:
    text = str(schema_type)
    return text in ("List[Tensor]", "Tensor[]", "List[Optional[Tensor]]", "Tensor?[]", "List[Tensor?]")


def bound_arguments(func, args, kwargs) -> list[tuple[Any, Any]]:
    """(schema argument, value) in schema order, defaults filled in."""
    out = []
    for index, argument in enumerate(func._schema.arguments):
        if index < len(args) and not argument.kwarg_only:
            value = args[index]
        elif argument.name in kwargs:
            value = kwargs[argument.name]
        elif argument.has_default_value():
            value = argument.default_value
        else:
            value = None
        out.append((argument, value))
    return out


def flat_tensors(value: Any) -> list[tuple[int, Any]]:
    """(position, tensor or None) of an op's output, tuples flattened."""
    if isinstance(value, torch.Tensor):
        return [(0, value)]
    if isinstance(value, (tuple, list)):
        items = []
        for item in value:
            if isinstance(item, torch.Tensor) or item is None:
                items.append(item)
            elif isinstance(item, (tuple, list)):
                items.extend(t for _, t in flat_tensors(item))
        return list(enumerate(items))
    return []


def _tensor_arguments(args, kwargs) -> list:
    """The tensors an op reads, those inside a list argument (``stack``'s) included."""
    values = [*args, *(kwargs or {}).values()]
    return [t for v in values for t in (v if isinstance(v, (list, tuple)) else [v]) if isinstance(t, torch.Tensor)]


class Recorder(TorchDispatchMode):
    """One run's recorder.  ``simulated`` runs compute fake collective values (taint tracking)."""

    def __init__(self, spans: SpanFinder, simulated: bool, fold_constants: bool = False) -> None:
        super().__init__()
        self.spans = spans
        self.simulated = simulated
        # record an op that reads only constants as the value torch computed (spelled out, at any
        # size): its semantics are then torch's own (integer bit operations in the tensor's width)
        self.fold_constants = fold_constants
        self._folded_storage: set[int] = set()  # storages of constants read through a dtype view
        self.names = NameTable()
        self.recording = Recording()
        self.recording.shapes = self.names.shapes
        self.views: dict[int, ViewOrigin] = {}
        self.tainted: set[str] = set()
        self.handles: dict[int, str] = {}              # id(Work) -> handle of an async c10d call
        self.deferred: dict[str, list] = {}             # handle -> pieces emitted at its wait
        self.handle_count = 0
        self.works: list[Any] = []        # kept alive so their ids stay unique
        self.paused = False
        self.reduce_op: str | None = None  # set by the torch.distributed wrappers (collectives.py)
        self.collective_outputs: list[Any] = []   # tensors a recorded collective writes its result into
        self.read_unreal: str | None = None     # why later exceptions of a simulated rank prove nothing
        self.replay = replay.current() if simulated else None   # real collective values (replay.py)
        self.replayed = False   # the collective being recorded holds real values (not tainted)
        self.lines = None   # a bindings.LineTrace while the code runs: which line bound the names an op reads
        self._random_lines: dict[int | None, int] = {}
        self._constant_lines: dict[int | None, int] = {}
        self._constants: set[str] = set()   # names holding a constant made outside the recording
        self._selected: dict[str, frozenset[str]] = {}   # value name -> the selections it was computed from
        self._selection_lines: dict[int | None, int] = {}
        from . import collectives

        self._collectives = collectives

    # --- the mode --------------------------------------------------------------------------

    def __enter__(self):
        from .dirty import following_dirty_inputs
        from .forward_returns import ForwardReturns, noting_forward_returns
        from .python_reads import reported_to

        self._dirty = following_dirty_inputs(self)
        self._dirty.__enter__()
        self._returns = noting_forward_returns(ForwardReturns(self.spans.checked, self.value_name,
                                                              self._handed_back_forward))
        self._returns.__enter__()
        self._reads = reported_to(self)
        self._reads.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._reads.__exit__(*exc)
            self._returns.__exit__(*exc)
            self._dirty.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(t is not torch.Tensor and not issubclass(t, FakeTensor) and is_traceable_wrapper_subclass_type(t)
               for t in types):
            # DTensor's sharding propagation may raise on it before any of its inner ops reaches this mode
            self.recording.subclass_op = self._named_op(func, args, kwargs)
            return NotImplemented  # DTensor and friends: their inner ops come back here
        replayed = False
        try:
            if self.replay is not None and not self.paused and replay.is_collective(func):
                out, replayed = self.replay.call(func, args, kwargs, self.spans.span().line)
            elif self.simulated:
                out = fake_group.call(func, args, kwargs)
            else:
                out = func(*args, **kwargs)
        except Exception:
            if self.simulated and self.read_unreal is None and self._reads_collective(args, kwargs):
                self.read_unreal = (f"{func} at line {self.spans.span().line} read values a simulated collective "
                                    f"computed (not real values)")
                self.recording.read_collective = True
            self.recording.failed = self._named_op(func, args, kwargs)
            raise
        if self.paused or _involves_fake(args, kwargs, out) or generator_bookkeeping(args, kwargs, out):
            return out
        span = self.spans.span()
        if self.lines is not None and self.lines.active:
            span = self._with_bound(span, args, kwargs)
        self.replayed = replayed
        try:
            self.record(func, args, kwargs, out, span)
        except _Unrecordable as problem:
            self.problem(span, str(problem))
        finally:
            self.replayed = False
        return out

    def _with_bound(self, span: Span, args, kwargs) -> Span:
        """``span`` with the operands its statement reads through names bound on an earlier line, and
        those an earlier bare call read and left unwritten."""
        tensors = [t for value in (*args, *kwargs.values()) for _, t in flat_tensors(value)
                   if isinstance(t, torch.Tensor)]
        bound = [(name, variable, line) for tensor, variable, line in self.lines.reads(self.spans.frame, tensors)
                 if (name := self.value_name(tensor)) is not None]
        left = []
        if self.lines.left:
            for name in map(self.value_name, tensors):
                found = self.lines.left_unwritten(name) if name is not None else None
                if found is not None:
                    left.append((name, *found))
        if left:
            span = replace(span, left=tuple(left))
        picked = [(name, variable, line) for tensor, variable, line in self.lines.picked(self.spans.frame, tensors)
                  if span.within is None and (name := self.value_name(tensor)) is not None]
        if picked:
            span = replace(span, picked=tuple(picked))
        return replace(span, bound=tuple(bound), after=self.lines.ran_before(self.spans.frame)) if bound else span

    def _handed_back_forward(self, tensor, frame) -> None:
        from .forward_returns import insertion_line

        name, span = self.value_name(tensor), self.spans.of_frame(frame)
        if name is None or span is None or name in self.recording.forward_handed_back:
            return
        returned = frame.f_lineno
        after = insertion_line(frame.f_code.co_filename, returned)
        span = replace(span, within=(span.within[0], after)) if span.within is not None else replace(span, line=after)
        self.recording.forward_handed_back[name] = (span, returned)

    def value_name(self, tensor) -> str | None:
        """The recorded name of ``tensor``'s current value (None: none recorded)."""
        binding = self.names.lookup(tensor)
        return binding.name if binding is not None else None

    def _named_op(self, func, args, kwargs) -> FailedOp | None:
        """``func`` with the names of its tensor operands (a DTensor's: its local tensor's), never
        naming new ones (no op is emitted): where a raise came from."""
        try:
            operands = [t for _, t in flat_tensors([*args, *kwargs.values()]) if isinstance(t, torch.Tensor)]
            names = tuple(self.names.current(getattr(t, "_local_tensor", t)) for t in operands)
            return FailedOp(str(func), names, self.spans.span())
        except Exception:   # noqa: BLE001 - only a hint for where a raise came from; never in the way
            return None

    # --- helpers used by collectives.py and the runner ------------------------------------

    def problem(self, span: Span, message: str) -> None:
        self.recording.problems.append(Problem(span, message))

    def emit(self, kind: str, args: list[str], attrs: dict, results: list[str], span: Span) -> None:
        self.recording.ops.append(Op(tuple(results), kind, tuple(args), attrs, span))
        if self.simulated and any(a in self.tainted for a in args):
            self.tainted.update(results)
        if self._selected:
            sources = frozenset().union(*(self._selected.get(a, ()) for a in args))
            if sources:
                self._selected.update((result, sources) for result in results)

    @contextlib.contextmanager
    def finishing_collectives(self):
        """A backend finishing collectives (``Work.wait``): gloo copies a reduce-scatter's result
        into the output buffer from a temporary of its own.  That write is the recorded collective's
        result, not an op of the user's: unrecorded, and the output keeps the collective's name."""
        before = [(t, int(t._version), self.names.current(t)) for t in self.collective_outputs]
        paused, self.paused = self.paused, True
        try:
            yield
        finally:
            self.paused = paused
            for tensor, version, name in before:
                if name is not None and int(tensor._version) != version:
                    self.names.bind(tensor, name)

    def written_uncounted(self, tensor: Any, new_name: str, span: Span) -> None:
        """``written`` for a write torch does not count: a c10d collective bumps no version counter,
        so the views of ``tensor`` (which share its counter) would still look current; they are
        marked out of date, to be re-derived from ``tensor`` when read next."""
        self.written(tensor, new_name, span)   # ``tensor`` and the bases it views: named anew
        rewritten, root = {id(tensor)}, tensor
        while id(root) in self.views:
            root = self.views[id(root)].base
            rewritten.add(id(root))
        sharing, grown = {id(root)}, True
        while grown:   # every view the recorder saw made from the root, and views of those
            grown = False
            for key, origin in self.views.items():
                if key not in sharing and id(origin.base) in sharing:
                    sharing.add(key)
                    grown = True
        self.names.mark_stale(sharing - rewritten)

    def bind_leaf(self, tensor: Any, name: str, span: Span) -> None:
        self.names.bind(tensor, name)
        self.recording.leaves.append(TensorSpec(name, tuple(tensor.shape), spec_dtype(tensor.dtype), (), span))

    def name_of(self, tensor: Any, span: Span) -> str:
        name = self.names.current(tensor)
        if name is not None:
            return name
        if self.names.is_stale(tensor):
            refreshed = self._refresh(tensor, span)
            if refreshed is not None:
                return refreshed
            binding = self.names.lookup(tensor)
            self.problem(span, f"a tensor ({binding.name}) was changed in place through a path the recorder "
                               f"cannot follow (a view it did not see created) before this line reads it")
            return binding.name
        return self._constant(tensor, span)

    def written(self, tensor: Any, new_name: str, span: Span, pending: bool = False) -> None:
        """After an op wrote ``tensor`` (now ``new_name``): carry the write to the bases it views.

        ``pending``: the op was an aten op with a ``(a!)`` argument, whose version bump is still to come."""
        self.names.bind(tensor, new_name, pending)
        origin = self.views.get(id(tensor))
        while origin is not None:
            base = origin.base
            base_name = self.names.lookup(base)
            if base_name is None:
                self.problem(span, "a write into a view of a tensor the recorder never saw")
                return
            scatter = SCALAR_WRITE_BACK.get(origin.kind)
            result = self.names.fresh()
            if scatter is not None:
                self.emit(scatter, [base_name.name, new_name], {**origin.attrs, "write_back": True}, [result], span)
            elif origin.kind in ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
                                 "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.dims",
                                 "aten.squeeze.default", "aten.flatten.using_ints", "aten.unflatten.int"):
                self.emit("aten.view.default", [new_name], {"size": list(base.shape)}, [result], span)
            elif origin.kind == "aten.t.default":
                self.emit("aten.t.default", [new_name], {}, [result], span)
            elif origin.kind == "aten.transpose.int":
                self.emit("aten.transpose.int", [new_name], dict(origin.attrs), [result], span)
            elif origin.kind == "aten.permute.default":
                dims = [int(d) % base.dim() for d in origin.attrs.get("dims", [])]
                inverse = [dims.index(i) for i in range(len(dims))]
                self.emit("aten.permute.default", [new_name], {"dims": inverse}, [result], span)
            else:
                self.problem(span, f"a write into a view made by {origin.kind}: the recorder cannot carry it back "
                                   f"to the viewed tensor")
                return
            self.names.bind(base, result, pending)
            tensor, new_name = base, result
            origin = self.views.get(id(tensor))

    def _refresh(self, tensor: Any, span: Span) -> str | None:
        """A stale view whose base is current again: re-derive it from the base."""
        origin = self.views.get(id(tensor))
        if origin is None:
            return None
        base_name = self.names.current(origin.base)
        if base_name is None:
            base_name = self._refresh(origin.base, span)
            if base_name is None:
                return None
        name = self.names.fresh()
        self.emit(origin.kind, [base_name], dict(origin.attrs), [name], span)
        self.names.bind(tensor, name)
        return name

    def _digest(self, tensor: Any) -> str:
        paused, self.paused = self.paused, True   # our own reads of the values are not the user's ops
        try:
            return hashlib.sha256(tensor.detach().contiguous().cpu().numpy().tobytes()).hexdigest()
        finally:
            self.paused = paused

    def _numbers(self, tensor: Any) -> Any:
        paused, self.paused = self.paused, True
        try:
            return tensor.detach().contiguous().cpu().numpy().copy()
        finally:
            self.paused = paused

    def _only_constants(self, args, kwargs) -> bool:
        tensors = [t for t in [*args, *(kwargs or {}).values()] if isinstance(t, torch.Tensor)]
        return bool(tensors) and all(self.names.current(t) in self._constants for t in tensors)

    @staticmethod
    def _exactly_folded(kind: str, out, args, kwargs) -> bool:
        """An op whose value torch computes as the rules would, bar float rounding the rules leave
        out: an integer or bool result, the same bits read as another dtype, or a conversion of
        integers (a float op on constants keeps its exact rule)."""
        if not out.dtype.is_floating_point or kind == "aten.view.dtype":
            return True
        tensors = _tensor_arguments(args, kwargs)
        return kind.startswith(("aten._to_copy.", "aten.to.")) and not any(t.dtype.is_floating_point for t in tensors)

    def _made_outside(self, args, kwargs) -> bool:
        """Every tensor the op reads is a constant: made outside the recording (never bound, not
        changed in place since) or computed from such constants only."""
        tensors = _tensor_arguments(args, kwargs)
        return bool(tensors) and all(self.names.current(t) in self._constants
                                     or self.names.lookup(t) is None and not self.names.is_stale(t) for t in tensors)

    def _python_scalar(self, value: bool | int | float, span: Span) -> str:
        dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
        name = self.names.fresh("c")
        self.emit("aten.scalar_tensor.default", [], {"s": value, "dtype": dtype}, [name], span)
        return name

    def _constant(self, tensor: Any, span: Span) -> str:
        """A tensor made outside the recording (a python scalar torch wrapped, a module constant)."""
        paused, self.paused = self.paused, True   # our own reads of the constant are not the user's ops
        try:
            small = tensor.numel() <= (FOLDED_CONSTANT if self.fold_constants else SMALL_CONSTANT)
            values = tensor.detach().reshape(-1).tolist() if small else None
            digest = None if values is not None else \
                hashlib.sha256(tensor.detach().contiguous().cpu().numpy().tobytes()).hexdigest()
        finally:
            self.paused = paused
        if values is not None and tensor.dim() <= 4:
            dtype = dtype_name(tensor.dtype)
            names = []
            for value in values:
                name = self.names.fresh("c")
                self.emit("aten.scalar_tensor.default", [], {"s": value, "dtype": dtype}, [name], span)
                names.append(name)
            if tensor.dim() == 0:
                self.names.bind(tensor, names[0])
                self._constants.add(names[0])
                return names[0]
            stacked = self.names.fresh("c")
            if names:
                self.emit("aten.stack.default", names, {"dim": 0, "list_lengths": {"tensors": len(names)}},
                          [stacked], span)
            else:
                self.emit("aten.zeros.default", [], {"size": [0], "dtype": dtype}, [stacked], span)
            shaped = self.names.fresh("c")
            self.emit("aten.view.default", [stacked], {"size": list(tensor.shape)}, [shaped], span)
            self.names.bind(tensor, shaped)
            self._constants.add(shaped)
            return shaped
        count = self._constant_lines.get(span.line, 0)
        self._constant_lines[span.line] = count + 1
        name = f"constant_L{span.line}_{count}"
        self.bind_leaf(tensor, name, span)
        self.recording.fingerprints[name] = digest or ""
        return name

    # --- recording ------------------------------------------------------------------------

    def record(self, func, args, kwargs, out, span: Span) -> None:
        kind = str(func)
        if func.namespace == "profiler":  # record_function markers: no values
            return
        if func.namespace in ("c10d", "_c10d_functional") and kind not in ALIASES:
            self._collectives.record(self, kind, func, args, kwargs, out, span)
            return
        if kind in ALIASES:
            source = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if source is not None and isinstance(out, torch.Tensor):
                name = self.name_of(source, span)
                # detach and alias are views: autograd gives the result its source's version counter
                # after this mode returns (a detach of a weight an optimizer step updated in place)
                shared = int(source._version) if kind in SHARED_COUNTER else None
                self.names.bind(out, name, by_address=False, version=shared)
                if id(source) in self.views:
                    self.views[id(out)] = self.views[id(source)]
            return
        if kind in FOLDED_ON_CONSTANTS and isinstance(out, torch.Tensor) and self._only_constants(args, kwargs):
            self._constant(out, span)  # bookkeeping on small constants (DTensor / FSDP meshes): its values
            return                     # are recorded, not the storage arithmetic or data-dependent shape
        if self.fold_constants and isinstance(out, torch.Tensor) and (not func.is_view or kind == "aten.view.dtype") \
                and not any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments) \
                and self._made_outside(args, kwargs) and self._exactly_folded(kind, out, args, kwargs):
            if func.is_view:  # the same bits read as another dtype: a write through either is not followed
                self._folded_storage.add(out.untyped_storage().data_ptr())
            self._constant(out, span)  # torch's value of an op on constants only
            return
        if kind in DATA_DEPENDENT:
            self._data_dependent(kind, func, args, kwargs, span)
            if kind in ("aten._local_scalar_dense.default", "aten.is_nonzero.default", "aten.equal.default",
                        "aten.item.default", "aten.allclose.default"):
                return
        arg_names, attrs, written = self._arguments(func, args, kwargs, span)
        if self._folded_storage and any(t.untyped_storage().data_ptr() in self._folded_storage for t in written):
            self.problem(span, "an in-place write into a tensor also read as another dtype (a folded view) is not "
                               "followed")
        if kind in SIZED_BY_VALUES and isinstance(out, torch.Tensor):
            attrs["count"] = int(out.shape[0])   # a data-dependent size: the one of the path recorded
        if kind == "aten.as_strided.default" and args and isinstance(args[0], torch.Tensor):
            # as_strided addresses memory: the rule needs to know whether memory order is logical order
            attrs["input_contiguous"] = bool(args[0].is_contiguous())
            attrs["input_storage_offset"] = int(args[0].storage_offset())
        outputs = flat_tensors(out)
        if any(t is None for _, t in outputs):
            attrs["result_mask"] = [t is not None for _, t in outputs]
        if kind in RANDOM_FACTORIES:
            self._random(kind, outputs, written, span)
            return
        # arguments the op writes without returning them (``out=`` of a custom op) are results too,
        # after the returned ones: the rule must give their new values (an op whose rule does not
        # is an engine error, never a silently stale value)
        unreturned = [t for t in written if not any(t is o for _, o in outputs)]
        if unreturned:
            attrs["written_results"] = len(unreturned)
        results = [self.names.fresh() for _, tensor in outputs if tensor is not None]
        extra = [self.names.fresh() for _ in unreturned]
        self.emit(kind, arg_names, attrs, results + extra, span)
        if kind in SELECTIONS and len(results) == len(outputs) \
                and not (self.simulated and self._reads_collective(args, kwargs)):   # no real values
            self._selection(results[SELECTIONS[kind]], outputs[SELECTIONS[kind]][1], span)
        if all(name in self._constants for name in arg_names) and not kind.startswith("aten.empty") \
                and (arg_names or kind in CONSTANT_FACTORIES):
            self._constants.update(results)  # computed from constants only: a constant too
        result_iter = iter(results)
        for position, tensor in outputs:
            if tensor is None:
                continue
            name = next(result_iter)
            if any(tensor is w for w in written):
                self.written(tensor, name, span, pending=True)
            else:
                self.names.bind(tensor, name)
                if func.is_view and args and isinstance(args[0], torch.Tensor):
                    view_attrs = {k: v for k, v in attrs.items() if k != "result_mask"}
                    if len(outputs) > 1:  # a piece of split / unbind: re-deriving it must pick this piece
                        view_attrs["result_mask"] = [i == position for i in range(len(outputs))]
                    self.views[id(tensor)] = ViewOrigin(args[0], kind, view_attrs)
        for tensor, name in zip(unreturned, extra):
            self.written(tensor, name, span, pending=True)

    def _arguments(self, func, args, kwargs, span: Span) -> tuple[list[str], dict, list[Any]]:
        names: list[str] = []
        attrs: dict[str, Any] = {}
        written: list[Any] = []
        lengths: dict[str, int] = {}
        for argument, value in bound_arguments(func, args, kwargs):
            alias = argument.alias_info
            if _is_tensor_type(argument.type):
                if value is None:
                    attrs[argument.name] = None
                elif isinstance(value, (bool, int, float)):  # a python number where torch takes a tensor
                    names.append(self._python_scalar(value, span))
                else:
                    names.append(self.name_of(value, span))
                    if alias is not None and alias.is_write:
                        written.append(value)
            elif _is_tensor_list_type(argument.type):
                items = list(value or [])
                missing = [i for i, item in enumerate(items) if item is None]
                for item in items:
                    if item is not None:
                        names.append(self.name_of(item, span))
                        if alias is not None and alias.is_write:
                            written.append(item)
                lengths[argument.name] = len(items) - len(missing)
                if missing:
                    attrs[f"{argument.name}_none"] = missing
            else:
                attrs[argument.name] = plain(value)
        if lengths:
            attrs["list_lengths"] = lengths
        return names, attrs, written

    def _random(self, kind: str, outputs, written, span: Span) -> None:
        """A random draw is a leaf, matched between runs by its line and occurrence."""
        count = self._random_lines.get(span.line, 0)
        self._random_lines[span.line] = count + 1
        name = f"random_L{span.line}_{count}"
        tensors = [t for _, t in outputs if t is not None]
        if len(tensors) != 1:
            raise _Unrecordable(f"{kind} returns {len(tensors)} tensors; a random draw is expected to return one")
        tensor = tensors[0]
        self.bind_leaf(tensor, name, span)
        # the draw is one leaf on every run only if it gave the same numbers (a seed that depends on
        # the rank gives others): to_ir compares these digests
        self.recording.fingerprints[name] = self._digest(tensor)
        self.recording.drawn[name] = self._numbers(tensor)
        if kind.startswith("aten.randint") and not tensor.is_floating_point():
            low, high = int(tensor.min()) if tensor.numel() else 0, int(tensor.max()) + 1 if tensor.numel() else 1
            self.recording.leaves[-1] = TensorSpec(name, tuple(tensor.shape), spec_dtype(tensor.dtype), (), span,
                                                   bounds=(low, high))
        if written:
            self.written(tensor, name, span, pending=True)

    def _selection(self, name: str, indices: Any, span: Span) -> None:
        """Keep a selection's indices and follow what is computed from them (``steering.py``)."""
        occurrence = self._selection_lines.get(span.line, 0)
        self._selection_lines[span.line] = occurrence + 1
        self.recording.selections[name] = (self._numbers(indices), spec_dtype(indices.dtype), span, occurrence)
        self._selected[name] = frozenset({name})

    def _reads_collective(self, args, kwargs) -> bool:
        tensors = [t for _, t in flat_tensors(list(args) + list(kwargs.values()))]
        return any(self.names.current(t) in self.tainted for t in tensors if isinstance(t, torch.Tensor))

    def python_read(self, kind: str, tensor) -> None:
        """The code read ``tensor``'s values into Python without an op (``python_reads.py``)."""
        if isinstance(tensor, torch.Tensor) and not isinstance(tensor, FakeTensor):
            self._data_dependent(kind, None, (tensor,), {}, self.spans.span())

    def _data_dependent(self, kind: str, func, args, kwargs, span: Span) -> None:
        reads_collective = self._reads_collective(args, kwargs)
        if self.simulated and reads_collective:
            self.read_unreal = self.read_unreal or (f"line {span.line} read tensor values a simulated collective "
                                                    f"computed (not real values) into Python")
            self.recording.read_collective = self.recording.read_into_python = True
            self.problem(span, f"line {span.line} reads tensor values ({kind}) computed by a collective; the "
                               f"simulated ranks do not compute real collective values, so this control flow or "
                               f"size cannot be followed")
        else:
            self.recording.assumptions.append(
                f"line {span.line} reads tensor values ({kind.split('.')[1]}): the path taken for the recorded "
                f"inputs is the one verified")
        if self._selected:
            for _, tensor in flat_tensors([*args, *kwargs.values()]):
                name = self.names.current(tensor) if isinstance(tensor, torch.Tensor) else None
                for source in self._selected.get(name, ()):
                    self.recording.steering.setdefault(source, span.line)


class _Unrecordable(Exception):
    pass


def is_traceable_wrapper_subclass_type(cls) -> bool:
    """DTensor, AsyncCollectiveTensor: subclasses that unwrap to plain tensors."""
    return hasattr(cls, "__tensor_flatten__") and hasattr(cls, "__tensor_unflatten__")


def _involves_fake(args, kwargs, out) -> bool:
    for value in list(args) + list(kwargs.values()) + [out]:
        if isinstance(value, FakeTensor):
            return True
        if isinstance(value, (list, tuple)) and any(isinstance(v, FakeTensor) for v in value):
            return True
    return False
