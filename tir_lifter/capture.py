"""Run a kernel file's own ``__main__`` and record every kernel it asks TileLang for.

Runs only inside the elaboration child process (``elaborate.py``): it executes user code.
The file runs as ``__main__`` with ``sys.argv = [file]`` (argparse defaults apply) while:

* ``@tilelang.jit`` calls and ``.compile(...)``, ``tilelang.compile(prim_func)`` and
  autotuned kernels record their arguments (an :class:`Instance`) instead of compiling,
  and hand back a stand-in kernel whose launches return its outputs as meta tensors (an
  eager kernel called with tensors is launched at once);
* torch tensors asked for on ``cuda`` are made on the ``meta`` device (shapes only: the
  file's own big reference computations cost nothing) unless they are small (offsets,
  indices: made on the CPU, so ``.item()`` works), benchmarks return a fixed time;
* the run stops at the first error or after ``budget`` seconds; what was recorded until
  then is kept (a reference check failing on meta tensors is the usual end);
* the file's own checks name each kernel's reference: the tensors a kernel is launched
  with (:class:`Launch`), calls of the file's functions with tensor arguments, and the
  callable given to ``profiler.assert_allclose`` are recorded (:class:`ReferenceCall`),
  so ``reference.py`` can pair them by tensor identity and re-run the reference at the
  reduced sizes with the call site's other arguments;
* every torch call's result is remembered with its arguments (:class:`Derivation`; an
  in-place change voids it) and the file's comparisons of two tensors are recorded
  (:class:`Comparison`), so an expected value computed inline from a kernel's inputs can be
  replayed at the reduced sizes.
"""
from __future__ import annotations

import contextlib
import inspect
import io
import os
import signal
import sys
import threading
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass(frozen=True)
class Instance:
    """One kernel the file asked for: ``jit`` (TileLang's JIT wrapper) called with ``args``
    and ``kwargs``, or an already elaborated ``primfunc``."""

    name: str
    line: int | None
    jit: Any = None
    args: tuple = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    primfunc: Any = None
    origin: str = "call"
    factory: Any = None  # a plain Python function of the file that returned the PrimFunc
    pass_configs: tuple[tuple[str, Any], ...] = ()  # the compiler options it is built with (``pass_configs``)
    called_at: int | None = None  # the line of the file whose call asked for it (its sizes and dtypes)


@dataclass(frozen=True)
class Launch:
    """``instance`` launched with ``args`` (positional, the kernel's parameters without its
    ``out_idx`` outputs) or, for an eager kernel, ``named`` tensors by parameter name."""

    instance: Instance
    args: tuple = ()
    out_idx: tuple[int, ...] | None = None
    named: tuple[tuple[str, Any], ...] = ()
    outputs: tuple[tuple[str, Any], ...] = ()  # output parameter -> the (meta) tensor the launch returned
    backward_of: str | None = None  # the autograd node whose backward launched it (``_attentionBackward``)


@dataclass(frozen=True)
class Derivation:
    """A tensor the file computed under the run: ``func(*args, **kwargs)``, item ``index`` of its result."""

    func: Any
    args: tuple
    kwargs: dict
    index: int | None = None


@dataclass(frozen=True)
class Comparison:
    """The file compared ``actual`` with ``expected`` (``assert_close``, ``allclose``) at ``line``."""

    actual: Any
    expected: Any
    line: int | None = None


@dataclass(frozen=True)
class ReferenceCall:
    """The file called ``func`` with ``arguments`` (name -> value, tensors included), or
    handed it to ``profiler.assert_allclose`` of ``instance`` (``via == "profiler"``: TileLang
    calls it with the kernel's inputs in order; ``partial`` keywords are in ``arguments``)."""

    func: Any
    arguments: tuple[tuple[str, Any], ...]
    via: str = "call"
    instance: Instance | None = None
    line: int | None = None
    out_idx: tuple[int, ...] | None = None


@dataclass
class Capture:
    instances: list[Instance] = field(default_factory=list)
    namespace: dict[str, Any] = field(default_factory=dict)
    stopped_by: str = ""
    launches: list[Launch] = field(default_factory=list)
    references: list[ReferenceCall] = field(default_factory=list)
    wrappers: set[int] = field(default_factory=set)  # references[i] launched or built a kernel: not a reference
    active: list[int] = field(default_factory=list)  # references whose call is running
    results: dict[int, Any] = field(default_factory=dict)  # references[i] -> what the call returned
    derivations: dict[int, Derivation] = field(default_factory=dict)  # id of a tensor -> how the file made it
    comparisons: list[Comparison] = field(default_factory=list)
    alive: list[Any] = field(default_factory=list)  # tensors whose ids are keys above stay alive
    real_data: bool = False  # large tensors on ``cuda`` were made with real values (see ``run_file``)
    spent: set[int] = field(default_factory=set)  # storages of those a kernel was launched with
    first_run: str = ""  # how the run without real data ended, when this one is the second

    def kernel_used(self) -> None:
        self.wrappers.update(self.active)

    def ending(self) -> str:
        """How the run ended, in words (a second run with real data says so)."""
        if not self.first_run:
            return self.stopped_by
        if self.first_run == self.stopped_by:
            return f"{self.stopped_by} (also in a second run with real values for the tensors on cuda)"
        return (f"{self.stopped_by} (in a second run with real values for the tensors on cuda; the first, without "
                f"them, ended with {self.first_run})")

    def launched_with(self, tensors: Any) -> None:
        """With real data, the large tensors a kernel is launched with have no known values from then
        on (the stand-in kernel writes none of its outputs): later ops see them as ``meta`` tensors,
        as a run without real data does, never with the values they had before the launch."""
        if not self.real_data:
            return
        for tensor in tensors:
            if _is_tensor(tensor) and tensor.device.type == "cpu" and tensor.numel() > _MetaDevice.SMALL:
                self.spent.add(tensor.untyped_storage().data_ptr())
                self.alive.append(tensor)  # its memory is not reused by another tensor


REAL_SM_COUNT = 132  # the stand-in GPU's streaming multiprocessors (an H100 SXM)
_SM_COUNT = {"value": REAL_SM_COUNT, "reads": 0}


def _sm_count(self: Any) -> int:
    _SM_COUNT["reads"] += 1
    return _SM_COUNT["value"]


_FAKE_GPU = type("FakeGpuProperties", (), dict(
    name="NVIDIA H100", major=9, minor=0, multi_processor_count=property(_sm_count), shared_memory_per_block=49152,
    shared_memory_per_block_optin=232448, shared_memory_per_multiprocessor=233472, total_memory=80 * 2 ** 30,
    warp_size=32, max_threads_per_multi_processor=2048, regs_per_multiprocessor=65536, L2_cache_size=50 * 2 ** 20))()


def sm_count_reads() -> int:
    """How often TileLang or the file asked the stand-in GPU for its SM count so far."""
    return _SM_COUNT["reads"]


@contextlib.contextmanager
def sm_count(value: int) -> Iterator[None]:
    """The stand-in GPU reports ``value`` SMs while a kernel is built (a persistent kernel's grid
    is one block per SM: the count is a size the reduction shrinks, as a split count is)."""
    saved = _SM_COUNT["value"]
    _SM_COUNT["value"] = value
    try:
        yield
    finally:
        _SM_COUNT["value"] = saved


class _Stop(BaseException):
    """Ends the user's run (time budget)."""


def _within_jitted(frame: Any, jitted: set[Any]) -> bool:
    """``frame`` runs inside a ``@tilelang.jit`` function (its factory builds part of that kernel,
    ``return kernel_func(block_M, block_N)``): TileLang's elaboration of a kernel recorded already."""
    outer = frame.f_back
    while outer is not None:
        if outer.f_code in jitted:
            return True
        outer = outer.f_back
    return False


def _def_line(func: Any, path: str) -> int | None:
    try:
        if inspect.getsourcefile(func) and inspect.getsourcefile(func).endswith(path.split("/")[-1]):
            return inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        return None
    return None


class _StubProfiler:
    def __init__(self, capture: Capture | None = None, instances: tuple[Instance, ...] = (),
                 out_idx: tuple[int, ...] | None = None, kernel: _StubKernel | None = None):
        self._capture, self._instances, self._out_idx, self._kernel = capture, instances, out_idx, kernel

    def _get_inputs(self, with_output: bool = False, dynamic_symbolic_constraints: Any = None) -> list[Any]:
        """TileLang's profiler inputs: one tensor per parameter (outputs only ``with_output``), here
        meta tensors of the parameters' shapes, which the file passes to the kernel and its reference."""
        func = self._kernel.primfunc() if self._kernel is not None else None
        if func is None:
            raise NotImplementedError("the profiler's inputs of a kernel whose PrimFunc is unknown")
        params = list(func.params)
        outs = {i % len(params) for i in (self._out_idx or ())}
        return [_meta_tensor(func.buffer_map[p]) for i, p in enumerate(params) if with_output or i not in outs]

    def do_bench(self, *args: Any, **kwargs: Any) -> float:
        return 1.0

    def run_once(self, func: Any = None) -> Any:
        """TileLang's ``profiler.run_once(func=None)``: ``func`` (else the kernel) called once with
        the profiler's inputs, its result returned (a file asserts it is not None before its checks)."""
        return (func or self)(*self._get_inputs())

    def assert_allclose(self, reference_program: Any = None, *args: Any, **kwargs: Any) -> None:
        if self._capture is not None and callable(reference_program):
            for instance in self._instances:
                self._capture.references.append(_profiler_reference(reference_program, instance, self._out_idx))

    manual_assert_close = assert_allclose

    @property
    def func(self) -> Any:
        """TileLang's ``profiler.func`` is the kernel's adapter: calling it (or the profiler) launches
        the kernel as calling the kernel does."""
        if self._kernel is None:
            raise NotImplementedError("the profiler's kernel is unknown")
        return self._kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _profiler_reference(func: Any, instance: Instance, out_idx: tuple[int, ...] | None) -> ReferenceCall:
    import functools
    bound: dict[str, Any] = {}
    while isinstance(func, functools.partial):
        if func.args:  # positional arguments bound in front of the kernel's inputs: not modelled
            break
        bound = {**func.keywords, **bound}
        func = func.func
    line = getattr(getattr(func, "__code__", None), "co_firstlineno", None)
    return ReferenceCall(func, tuple(bound.items()), "profiler", instance, line, out_idx)


class _StubKernel:
    """What a recorded compile hands back: launches are recorded and return the kernel's
    outputs as meta tensors, benchmarks a fixed time."""

    def __init__(self, capture: Capture | None = None, instances: tuple[Instance, ...] = (),
                 out_idx: tuple[int, ...] | None = None, primfunc: Any = None, eager: Any = None):
        self._capture, self._instances, self._out_idx, self._primfunc = capture, instances, out_idx, primfunc
        self._eager = eager  # an eager kernel compiled ahead (``.compile(n_stream=16)``): launched as called eagerly

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._eager is not None:
            launched = self._eager(args, kwargs)
            if launched is not None:
                return launched
        named = self._outputs()
        if self._capture is not None:
            self._capture.kernel_used()
            self._capture.alive.append(named)
            self._capture.launched_with([*args, *kwargs.values()])
            if not kwargs:
                backward_of = _autograd_node()
                for instance in self._instances:
                    self._capture.launches.append(Launch(instance, tuple(args), self._out_idx, outputs=named,
                                                         backward_of=backward_of))
        return _returned(named)

    def primfunc(self) -> Any:
        """The PrimFunc this kernel was compiled from, or None."""
        if self._primfunc is None and self._instances:
            instance = self._instances[0]
            if instance.primfunc is not None:
                self._primfunc = instance.primfunc
            elif instance.jit is not None:
                self._primfunc = instance.jit.get_tir(*instance.args, **dict(instance.kwargs))
        return self._primfunc

    def _outputs(self) -> tuple[tuple[str, Any], ...]:
        """The kernel's ``out_idx`` outputs as meta tensors, so the file's run goes on to its checks."""
        if not self._out_idx or not self._instances:
            return ()
        try:
            func = self.primfunc()
            return () if func is None else _output_tensors(func, self._out_idx)
        except Exception:  # noqa: BLE001 - the run goes on without outputs
            return ()

    def get_profiler(self, *args: Any, **kwargs: Any) -> _StubProfiler:
        return _StubProfiler(self._capture, self._instances, self._out_idx, self)

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        return ""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def run_file(path: str, budget: float, real_data: bool = False) -> Capture:
    """Execute ``path`` as ``__main__`` under the recording patches.  ``real_data``: tensors asked for
    on ``cuda`` up to ``_MetaDevice.REAL_DATA`` elements are made on the CPU with real values (for a file
    that needs the values of its large tensors before it launches a kernel, see ``needs_data``)."""
    import tilelang
    import torch
    from tilelang.jit import JITImpl

    capture = Capture(real_data=real_data)
    seen: set[str] = set()
    produced_instances: list[tuple[Any, Instance]] = []  # PrimFuncs returned by recorded factory calls

    known: dict[str, Instance] = {}
    tirs: dict[tuple, Any] = {}  # an eager kernel's PrimFunc by the signature of its call

    def record(instance: Instance) -> Instance:
        key = f"{instance.name}|{instance.args!r}|{instance.kwargs!r}|{id(instance.primfunc)}"
        if key not in seen:
            seen.add(key)
            capture.instances.append(instance)
            known[key] = instance
        return known[key]

    jitted: set[Any] = set()  # code of the functions under @tilelang.jit: their runs are TileLang's elaboration

    def jit_instance(jit: Any, args: tuple, kwargs: dict, origin: str) -> Instance:
        func = getattr(jit.func, "orig_func", jit.func)
        jitted.add(getattr(func, "__code__", None))
        configs = {**dict(getattr(jit, "pass_configs", None) or {}), **dict(kwargs.get("pass_configs") or {})}
        return Instance(getattr(func, "__name__", "kernel"), _def_line(func, path), jit, tuple(args),
                        tuple(sorted(kwargs.items())), None, origin, pass_configs=_named_configs(configs),
                        called_at=_caller_line(path))

    def jit_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return jit_launch(self, args, kwargs, compiling=False)

    def jit_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        return jit_launch(self, args, kwargs, compiling=True)

    def jit_launch(self: Any, args: tuple, kwargs: dict, compiling: bool) -> Any:
        kwargs.pop("__return_compile_arguments", None)
        kwargs.update(kwargs.pop("__tune_params", {}))
        capture.kernel_used()
        instance = record(jit_instance(self, args, kwargs, "call"))
        eager = not compiling and is_eager(self, args, kwargs)
        if eager:
            return eager_launch(self, (instance,), args, kwargs)
        return _StubKernel(capture, (instance,), _kernel_out_idx(self, args, kwargs),
                           eager=compiled_eager(self, (instance,), kwargs))

    def compiled_eager(jit: Any, instances: tuple[Instance, ...], compiled: dict) -> Any:
        """The launch of an eager kernel compiled with some of its arguments (its ``T.empty`` outputs,
        sized by the launch's tensors, are returned as an eager call returns them), or None when
        the call is not an eager one."""
        def launch(args: tuple, kwargs: dict) -> Any:
            merged = {**compiled, **kwargs}
            if not is_eager(jit, args, merged):
                return None
            capture.kernel_used()
            return eager_launch(jit, instances, args, merged)
        return launch

    def eager_launch(jit: Any, instances: tuple[Instance, ...], args: tuple, kwargs: dict) -> Any:
        """An eager kernel called with tensors: launched at once, its ``T.empty`` outputs returned."""
        try:  # sizes declared with T.const (``n_stream``) are no parameters of the function
            params = jit.signature.parameters
            named = jit.signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in params}).arguments
        except TypeError:
            named = None
        try:
            key = (id(jit), _signature(args), _signature(tuple(sorted(kwargs.items()))))
            if key not in tirs:  # as TileLang compiles an eager kernel once per signature
                tirs[key] = jit.get_tir(*args, **kwargs)
            func = tirs[key]
            outputs = () if named is None else \
                _output_tensors(func, _eager_out_idx(jit, func) or (), _dynamic_sizes(func, named))
        except Exception:  # noqa: BLE001 - the run goes on without outputs
            outputs = ()
        capture.alive.append(outputs)
        if named is not None:
            tensors = tuple((k, v) for k, v in named.items() if _is_tensor(v))
            capture.launched_with([v for _, v in tensors])
            backward_of = _autograd_node()
            capture.launches.extend(Launch(instance, (), None, tensors, outputs, backward_of) for instance in instances)
        return _returned(outputs)

    def is_eager(jit: Any, args: tuple, kwargs: dict) -> bool:
        try:
            return jit._infer_jit_mode(*args, **kwargs) == "eager"
        except Exception:  # noqa: BLE001 - undecidable: treat as lazy (a kernel object)
            return False

    def tilelang_compile(func: Any, *args: Any, **kwargs: Any) -> Any:
        capture.kernel_used()
        out_idx = _out_idx(kwargs.get("out_idx", args[0] if args else None))
        for made, instance in produced_instances:
            if func is made:  # its factory call is recorded already
                return _StubKernel(capture, (instance,), out_idx, func)
        name = getattr(func, "__name__", None) or str(getattr(func, "attrs", {}).get("global_symbol", "kernel")
                                                       if getattr(func, "attrs", None) else "kernel")
        instance = record(Instance(name, None, None, (), (), func, "tilelang.compile",
                                   pass_configs=_named_configs(kwargs.get("pass_configs") or {})))
        return _StubKernel(capture, (instance,), out_idx, func)

    def autotune_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return autotune_launch(self, args, kwargs, compiling=False)

    def autotune_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        return autotune_launch(self, args, kwargs, compiling=True)

    def autotune_launch(self: Any, args: tuple, kwargs: dict, compiling: bool) -> Any:
        kwargs.pop("__return_kernel", None)
        capture.kernel_used()
        configs = self.configs
        if callable(configs):
            try:
                params = inspect.signature(configs).parameters
                bound = self.jit_impl.signature.bind_partial(*args, **kwargs).arguments
                configs = configs(**{k: v for k, v in bound.items() if k in params})
            except Exception:  # a config generator that needs a GPU: no configs known
                configs = []
        configs = list(configs or [])
        try:
            given = set(self.jit_impl.signature.bind_partial(*args, **kwargs).arguments)
        except TypeError:
            given = set(kwargs)
        if configs and given & set(configs[0]):  # as TileLang does: a tunable argument given, no tuning
            made = [record(jit_instance(self.jit_impl, args, dict(kwargs), "its tunable arguments as called"))]
            called = dict(kwargs)
        else:
            made = []
            for index, config in enumerate(configs):
                merged = dict(kwargs)
                merged.update(dict(config))
                made.append(record(jit_instance(self.jit_impl, args, merged, f"autotune config {index}")))
            called = {**kwargs, **dict(configs[0])} if configs else dict(kwargs)
        if not compiling and is_eager(self.jit_impl, args, called):  # an eager kernel runs (and returns) at the call
            return eager_launch(self.jit_impl, tuple(made), args, called)
        return _StubKernel(capture, tuple(made), _kernel_out_idx(self.jit_impl, args, called),
                           eager=compiled_eager(self.jit_impl, tuple(made), called))

    patches: list[tuple[Any, str, Any]] = [(JITImpl, "__call__", jit_call), (JITImpl, "compile", jit_compile),
                                           (tilelang, "compile", tilelang_compile)]
    try:
        from tilelang.autotuner.tuner import AutoTuneImpl
        patches.append((AutoTuneImpl, "__call__", autotune_call))
        patches.append((AutoTuneImpl, "compile", autotune_compile))
    except ImportError:
        pass
    try:
        import tilelang.profiler as profiler
        patches.append((profiler, "do_bench", lambda *a, **k: 1.0))
    except ImportError:
        pass
    # comparisons of (meta) kernel outputs with the file's own expected values are recorded, not run
    def compare(actual: Any = None, expected: Any = None, *args: Any, **kwargs: Any) -> bool:
        if _is_tensor(actual) and _is_tensor(expected):
            capture.comparisons.append(Comparison(actual, expected, _caller_line(path)))
        return True

    patches += [(torch.testing, "assert_close", compare), (torch, "allclose", compare)]
    import tilelang.transform as tl_transform
    keys = _PassConfigKeys(tilelang.PassConfigKey)
    patches += [(tilelang, "PassConfigKey", keys), (tl_transform, "PassConfigKey", keys)]
    try:
        import tilelang.testing as tl_testing
        patches.append((tl_testing, "torch_assert_close", compare))
        import tilelang.utils.tensor as tl_tensor
        patches.append((tl_tensor, "torch_assert_close", compare))
    except (ImportError, AttributeError):
        pass
    for name in ("synchronize", "empty_cache", "manual_seed", "manual_seed_all", "set_device", "init"):
        patches.append((torch.cuda, name, lambda *a, **k: None))
    patches += [(torch.cuda, "Event", _TimingEvent), (torch.cuda, "device", _OneDevice), (torch.cuda, "Stream", _Stream),
                (torch.cuda, "stream", _Stream.selected), (torch.cuda, "default_stream", lambda *a: _Stream()),
                (torch.cuda, "current_stream", lambda *a: _Stream())]
    try:
        import torch.utils.cpp_extension as cpp_extension
        patches.append((cpp_extension, "load", _cuda_extension_load(cpp_extension.load)))
    except ImportError:
        pass
    patches.append((torch, "Generator", _cpu_generator_class(torch)))
    saved = [(owner, name, owner.__dict__.get(name, getattr(owner, name, None))) for owner, name, _ in patches]
    # TileLang and the examples ask the (absent) GPU for its properties while building; these
    # stay for the rest of the child (TileLang asks again when it elaborates at reduced sizes)
    patches += [(torch.cuda, "is_available", lambda: True), (torch.cuda, "device_count", lambda: 1),
                (torch.cuda, "current_device", lambda: 0), (torch.cuda, "get_device_capability", lambda *a: (9, 0)),
                (torch.cuda, "get_device_name", lambda *a: "NVIDIA H100"),
                (torch.cuda, "get_device_properties", lambda *a: _FAKE_GPU)]
    try:
        from tilelang.carver.arch.driver import cuda_driver
        patches.append((cuda_driver, "get_cuda_device_properties", lambda *a: _FAKE_GPU))
        from tilelang.contrib import nvcc
        patches.append((nvcc, "get_target_compute_version", lambda *a, **k: f"{_FAKE_GPU.major}.{_FAKE_GPU.minor}"))
    except ImportError:
        pass
    gemm = _gemm_with_k_pack()
    if gemm is not None:
        patches.append((tilelang.language, "gemm", gemm))

    for owner, name, value in patches:
        setattr(owner, name, value)

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Stop()

    from tvm import tirx
    calls: dict[int, dict[str, Any]] = {}
    active: dict[int, int] = {}  # frame -> index of its ReferenceCall

    def profile(frame: Any, event: str, arg: Any) -> None:
        # plain factories of the file (``def matmul(M, ...): ... return main``): record the
        # call's arguments when it returns a PrimFunc
        code = frame.f_code
        if code.co_filename != path:
            return
        if event == "call":
            args = {n: frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount]}
            calls[id(frame)] = args
            if len(capture.references) < 200 and any(_is_tensor(v) for v in args.values()) and \
                    all(_plain_argument(v) for v in args.values()):
                func = _function_of(frame)
                if func is not None:
                    active[id(frame)] = len(capture.references)
                    capture.active.append(len(capture.references))
                    capture.references.append(ReferenceCall(func, tuple(args.items()), "call", None,
                                                            code.co_firstlineno))
        elif event == "return":
            if id(frame) in active:
                index = active.pop(id(frame))
                capture.active.remove(index)
                capture.results[index] = arg
            args = calls.pop(id(frame), None)
            func = _function_of(frame) if isinstance(arg, tirx.PrimFunc) and args is not None \
                and code not in jitted and not _within_jitted(frame, jitted) else None
            if func is not None:  # a factory of the file (a nested one too) returned a PrimFunc
                caller = frame.f_back
                called_at = caller.f_lineno if caller is not None and caller.f_code.co_filename == path else None
                instance = record(Instance(code.co_name, code.co_firstlineno, None, (), tuple(sorted(args.items())),
                                           None, "call", func, called_at=called_at))
                produced_instances.append((arg, instance))

    # the budget is CPU seconds (SIGPROF), so a loaded machine does not cut the run short
    old_handler = signal.signal(signal.SIGPROF, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, budget)
    module = types.ModuleType("__main__")
    module.__file__ = path
    namespace = module.__dict__  # a real module: TileLang's parser looks up the kernel's globals through it
    old_argv = sys.argv
    sys.modules["__main__"] = module
    sys.argv = [path]
    sys.path.insert(0, path.rsplit("/", 1)[0] if "/" in path else ".")
    try:
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec", dont_inherit=True)
        with _MetaDevice(capture, real_data), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            sys.setprofile(profile)
            threading.setprofile(profile)  # worker threads too (an autotuner builds its configs in a pool)
            try:
                exec(code, namespace)  # noqa: S102 - the documented tracing frontend, in its child process
            finally:
                sys.setprofile(None)
                threading.setprofile(None)
        capture.stopped_by = "end of file"
    except _Stop:
        capture.stopped_by = f"time budget ({budget:.0f} s)"
    except BaseException as exc:  # the user's run ends at its first error; what it asked for is kept
        capture.stopped_by = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        if _in_triton(exc):
            capture.stopped_by = f"a triton kernel, which needs a GPU driver ({capture.stopped_by})"
        lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == path]
        if lines:
            capture.stopped_by += f" at line {lines[-1]}"
        if os.environ.get("VERIFY_AGENT_DEBUG"):
            traceback.print_exc()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old_handler)
        sys.argv = old_argv  # the user's module stays __main__: TileLang finds kernel globals through it
        for owner, name, value in saved:
            setattr(owner, name, value)
    capture.namespace = namespace
    return capture


_KEEPS_VALUES = {"requires_grad_", "retain_grad", "share_memory_"}  # in place, but no element changes
_IN_PLACE = {"__setitem__"} | {f"__i{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and",
                                                         "or", "xor", "lshift", "rshift", "matmul")}


def _named_configs(configs: Any) -> tuple[tuple[str, Any], ...]:
    """``{PassConfigKey.TL_X: v}`` -> ``(("tl.x", v),)``: options by their string names."""
    try:
        return tuple(sorted((str(getattr(k, "value", k)), v) for k, v in dict(configs).items()))
    except (TypeError, ValueError):
        return ()


class _PassConfigKeys:
    """``tilelang.PassConfigKey`` during the run: an option the installed TileLang does not name
    (``TL_DISABLE_FAST_MATH`` of an example written for another version) is given by its string
    name, as TileLang takes options; building the kernel's TIR reads none of them."""

    def __init__(self, real: Any):
        self._real = real

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self._real, name)
        except AttributeError:
            if name.startswith("TL_"):
                return "tl." + name[3:].lower()
            raise

    def __iter__(self) -> Any:
        return iter(self._real)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real(*args, **kwargs)

    def __getitem__(self, name: str) -> Any:
        return self._real[name]


class _TimingEvent:
    """``torch.cuda.Event`` of the stand-in GPU: the file's timing runs, every interval is 1 ms
    (as benchmarks return a fixed time); CPU torch's own class refuses to be made."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: Any) -> float:
        return 1.0


class _Stream:
    """``torch.cuda.Stream`` of the stand-in GPU.  Launches are recorded in program order and each
    kernel is checked on its own, so the stream a launch goes to changes nothing recorded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, *args: Any) -> None:
        pass

    def wait_event(self, *args: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        return event if event is not None else _TimingEvent()

    def query(self) -> bool:
        return True

    @staticmethod
    def selected(stream: Any = None) -> Any:
        """``with torch.cuda.stream(s):``."""
        return contextlib.nullcontext()


class _OneDevice:
    """``torch.cuda.device(i)`` of the stand-in GPU, its only device: selecting it changes nothing
    (CPU torch's own context refuses, having no CUDA)."""

    def __init__(self, device: Any = None) -> None:
        self.idx = device

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


class CudaExtensionError(RuntimeError):
    """The file builds a CUDA C++ extension, which cannot be built or run without a GPU."""


def _cuda_extension_load(load: Any) -> Any:
    """``torch.utils.cpp_extension.load`` that refuses, with the reason, an extension with CUDA sources
    (it needs the CUDA toolkit to build and a GPU to run); C++-only ones build as they would."""

    def guarded(name: str, sources: Any, *args: Any, **kwargs: Any) -> Any:
        files = [sources] if isinstance(sources, str) else list(sources)
        cuda = [os.path.basename(str(f)) for f in files if str(f).endswith((".cu", ".cuh"))]
        if cuda or kwargs.get("with_cuda"):
            raise CudaExtensionError(f"the file builds the CUDA C++ extension {name} ({', '.join(cuda) or 'with_cuda'}), "
                                     f"which needs the CUDA toolkit and a GPU")
        return load(name, sources, *args, **kwargs)
    return guarded


def _in_triton(exc: BaseException) -> bool:
    """The error was raised while triton launched a kernel (no GPU driver here)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return any("/triton/runtime/" in frame.filename or "/triton/backends/" in frame.filename for frame in frames)


_NEEDS_DATA = ("meta tensor", "Meta tensors", "register_meta", "expected device meta")


def needs_data(stopped_by: str) -> bool:
    """The run stopped where the file needs the values of a tensor made on ``meta`` (``.item()``,
    ``nonzero``, ``bincount``, a backward mixing ``meta`` and CPU tensors)."""
    return any(text in stopped_by for text in _NEEDS_DATA)


def _gemm_with_k_pack() -> Any:
    """``T.gemm`` that also takes ``k_pack``, as TileLang's ``T.gemm`` did when the AMD examples were
    written; None when the installed TileLang has no such knob.  Installed, the knob is the ROCm
    dialect's ``T.gemm(..., k_pack=1|2)``: the same ``tl.tileop.gemm`` (``C (+)= op(A) @ op(B)``) with
    a ``k_pack`` annotation that only its MFMA/WMMA lowering reads, which packs ``k_pack`` K steps
    into one instruction and refuses a ``block_K`` that is not a multiple of the packed step, so
    every K element is summed once either way.  Without ``k_pack`` the common ``T.gemm`` runs."""
    try:
        import tilelang.language as language
        from tilelang.rocm.language.gemm_op import gemm as rocm_gemm
    except ImportError:
        return None
    common = language.gemm
    if "k_pack" in inspect.signature(common).parameters:
        return None  # this TileLang's T.gemm takes it itself

    def gemm(*args: Any, k_pack: Any = None, **kwargs: Any) -> Any:
        if k_pack is None:
            return common(*args, **kwargs)
        return rocm_gemm(*args, k_pack=k_pack, **kwargs)
    gemm.__doc__ = common.__doc__
    return gemm


def _autograd_node() -> str | None:
    """The name of the autograd node whose backward is running (a launch from a custom
    ``torch.autograd.Function``'s backward), else None."""
    import torch
    node = torch._C._current_autograd_node()
    return node.name() if node is not None else None


def _caller_line(path: str) -> int | None:
    """The line of the user's file that made the current call."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != path:
        frame = frame.f_back
    return frame.f_lineno if frame is not None else None


def _is_tensor(value: Any) -> bool:
    import torch
    return isinstance(value, torch.Tensor)


def _plain_argument(value: Any) -> bool:
    """Arguments a reference can be re-run with: tensors and plain Python values."""
    import torch
    return value is None or isinstance(value, (torch.Tensor, bool, int, float, str, torch.dtype))


def _function_of(frame: Any) -> Any:
    """The function object running in ``frame`` (module level, or found through the GC for a
    nested one); None when there is no single one."""
    import gc
    code = frame.f_code
    func = frame.f_globals.get(code.co_name)
    if getattr(func, "__code__", None) is code:
        return func
    found = [f for f in gc.get_referrers(code) if inspect.isfunction(f) and f.__code__ is code]
    return found[0] if len(found) == 1 else None


def _out_idx(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return (value,)
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        return None


def _meta_tensor(buffer: Any, sizes: dict | None = None) -> Any:
    import torch

    from .bits import torch_dtype
    dtype = torch_dtype(str(buffer.dtype)) or torch.float32
    shape = list(buffer.shape)
    if sizes:  # an output shaped by the launch's dynamic sizes (``T.empty((M, N))``, ``M = T.dynamic("M")``)
        from tvm import arith
        from tvm import tirx as tir
        shape = [arith.Analyzer().simplify(tir.stmt_functor.substitute(d, sizes)) if not isinstance(d, int) else d
                 for d in shape]
    return torch.empty([int(d) for d in shape], dtype=dtype, device="meta")


def _kernel_out_idx(jit: Any, args: tuple, kwargs: dict) -> tuple[int, ...] | None:
    """Positions of a compiled kernel's outputs: its ``out_idx``, or an eager kernel's ``T.empty`` buffers."""
    if getattr(jit, "out_idx", None) is None and "T.empty" in (getattr(jit, "func_source", "") or ""):
        try:
            return _eager_out_idx(jit, jit.get_tir(*args, **kwargs))
        except Exception:  # noqa: BLE001 - outputs unknown
            return None
    return _out_idx(getattr(jit, "out_idx", None))


def _eager_out_idx(jit: Any, func: Any) -> tuple[int, ...] | None:
    """Positions of an eager kernel's ``T.empty`` outputs in its PrimFunc ``func`` (parameters
    that are not in its signature)."""
    names = [func.buffer_map[p].name if p in func.buffer_map else "" for p in func.params]
    out = tuple(i for i, n in enumerate(names) if n and n not in jit.signature.parameters)
    return out or None


def _output_tensors(func: Any, out_idx: tuple[int, ...], sizes: dict | None = None) -> tuple[tuple[str, Any], ...]:
    """The ``out_idx`` parameters of ``func`` as meta tensors, by name (what a launch returns);
    ``sizes`` gives the dynamic sizes (``T.dynamic("M")``) their launch values."""
    params = list(func.params)
    buffers = [func.buffer_map[params[i % len(params)]] for i in out_idx]
    return tuple((buffer.name, _meta_tensor(buffer, sizes)) for buffer in buffers)


def _dynamic_sizes(func: Any, named: dict[str, Any]) -> dict:
    """The dynamic sizes of ``func`` (variables in its buffers' shapes) -> the sizes of the tensors
    the launch passes for those buffers (by parameter name)."""
    from tvm import tirx as tir
    sizes: dict = {}
    for param in func.params:
        buffer = func.buffer_map.get(param)
        tensor = named.get(buffer.name) if buffer is not None else None
        if not _is_tensor(tensor) or len(tensor.shape) != len(buffer.shape):
            continue
        for dim, size in zip(buffer.shape, tensor.shape):
            if isinstance(dim, tir.Var):
                sizes[dim] = int(size)
    return sizes


def _signature(values: Any) -> tuple:
    """Tensors by shape and dtype, other values by their text: what an eager kernel is built for."""
    if isinstance(values, (tuple, list)):
        return tuple(_signature(v) for v in values)
    if _is_tensor(values):
        return ("tensor", tuple(values.shape), str(values.dtype))
    return ("value", repr(values))


def _returned(named: tuple[tuple[str, Any], ...]) -> Any:
    """A launch's return value: nothing, its one output, or the tuple of its outputs."""
    tensors = [t for _, t in named]
    return None if not tensors else tensors[0] if len(tensors) == 1 else tuple(tensors)


def _cpu_generator_class(torch: Any) -> type:
    """``torch.Generator`` whose ``cuda`` generators are CPU ones (a subclass, so ``isinstance``
    holds): ``torch.Generator(device="cuda").manual_seed(42)`` seeds the file's draws, which
    the stand-in makes on the CPU (small tensors) or on ``meta`` (where a generator is ignored)."""
    real = torch.Generator

    class CpuGenerator(real):
        def __new__(cls, device: Any = "cpu") -> Any:
            text = str(device)
            return real.__new__(cls, device="cpu" if text.startswith("cuda") or text.isdigit() else device)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass  # made in __new__
    return CpuGenerator


class _MetaDevice:
    """A torch function mode for tensors asked for on ``cuda``: large ones are made on ``meta``
    (shapes, no data: the file's big reference computations cost nothing), small ones
    (at most ``SMALL`` elements: sequence offsets, indices, scales) on the CPU with real
    values, so ``.item()`` and data-dependent sizes work.  An op mixing the two runs on meta;
    ``torch.equal`` of a meta tensor (a check of values the stand-in does not have) is True."""

    SMALL = 1 << 16
    DERIVATIONS = 200_000  # tensors whose making is remembered (for the file's inline expected values)
    KEPT_BYTES = 1 << 29  # CPU memory those tensors may hold alive (meta tensors hold none)
    KEPT_SMALL_BYTES = 1 << 26  # and, past that, the tensors of at most SMALL elements made from such tensors only

    REAL_DATA = 1 << 26  # elements of a tensor made with real values when the file needs them (``real_data``)
    REAL_BYTES = 1 << 30  # bytes of all those tensors (the later ones are made on meta)
    REAL_FLOPS = 1 << 34  # floating-point operations of one op run on those values (a costlier one runs on meta)

    def __init__(self, capture: Capture | None = None, real_data: bool = False) -> None:
        self._capture, self._real_data = capture, real_data

    def __enter__(self) -> "_MetaDevice":
        import torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._pytree import tree_flatten, tree_map
        small, real_data, flops = self.SMALL, self._real_data, self.REAL_FLOPS
        made = [0]  # bytes of the large tensors made on ``cuda`` with real values so far

        def real(tensor: Any) -> bool:
            """``tensor`` (on the CPU or meta) is to be a ``cuda`` tensor with real values."""
            if tensor.numel() <= small:
                return True
            size = tensor.numel() * tensor.element_size()
            if not real_data or tensor.numel() > self.REAL_DATA or made[0] + size > self.REAL_BYTES:
                return False
            made[0] += size
            return True
        spent = self._capture.spent if self._capture is not None else set()
        capture, limit, byte_limit = self._capture, self.DERIVATIONS, self.KEPT_BYTES
        kept = [0, 0]  # bytes of the CPU tensors remembered: all of them, those remembered past the budget
        small_limit = self.KEPT_SMALL_BYTES

        def remember(func: Any, args: tuple, kwargs: dict, out: Any) -> Any:
            if capture is None:
                return out
            name = getattr(func, "__name__", "")
            if ((name.endswith("_") and not name.startswith("__")) or name in _IN_PLACE or "out" in kwargs) \
                    and name not in _KEEPS_VALUES:
                # in place: what made the tensor is no longer its value (voided even past the limits below)
                # (and so is everything it was computed from: it may be a view of them)
                changed = kwargs.get("out", args[0] if args else None)
                stack = [t for t in (changed if isinstance(changed, (tuple, list)) else (changed,))
                         if isinstance(t, torch.Tensor)]
                while stack:
                    tensor = stack.pop()
                    made = capture.derivations.get(id(tensor))
                    if made is not None and made.func is None:
                        continue
                    capture.derivations[id(tensor)] = Derivation(None, (), {})
                    capture.alive.append(tensor)
                    if made is not None:
                        stack.extend(t for t in tree_flatten((made.args, made.kwargs))[0]
                                     if isinstance(t, torch.Tensor))
                return out
            if len(capture.derivations) >= limit:
                return out  # what is not remembered cannot be replayed (the spec is refused, never guessed)
            results = out if isinstance(out, (tuple, list)) else (out,)
            made = [(index, value) for index, value in enumerate(results)
                    if isinstance(value, torch.Tensor) and id(value) not in capture.derivations
                    and not any(value is arg for arg in args)]  # ``requires_grad_`` returns its tensor
            size = sum(value.numel() * value.element_size() for _, value in made if value.device.type != "meta")
            if kept[0] >= byte_limit:
                # past the budget (large inputs drawn on the CPU fill it), a tensor made from small ones
                # only, as sequence offsets and index tables are, is still remembered, within a budget
                # of its own: what it keeps alive is small
                tensors = [value for _, value in made] + \
                    [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
                if kept[1] >= small_limit or any(t.numel() > small for t in tensors):
                    return out
                kept[1] += size
            kept[0] += size
            for index, value in made:
                item = index if isinstance(out, (tuple, list)) else None
                capture.derivations[id(value)] = Derivation(func, tuple(args), dict(kwargs), item)
                capture.alive.append(value)
            return out

        def on_cuda(device: Any) -> bool:
            text = str(device)
            return text.startswith("cuda") or text.isdigit()

        def to_meta(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() > 0:
                return value.to("meta")
            return value

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
                return remember(func, args, dict(kwargs or {}), self._run(func, args, dict(kwargs or {})))

            def _run(self, func: Any, args: tuple, kwargs: dict) -> Any:
                name = getattr(func, "__name__", "")
                if spent:  # memory a kernel was launched with: its values after the launch are not known
                    args, kwargs = tree_map(lambda t: t.to("meta") if _in_storages(t, spent) else t, (args, kwargs))
                if real_data and _costly(func, args, kwargs, small, flops):
                    args, kwargs = tree_map(to_meta, (args, kwargs))  # as a run without real data would
                if name == "cuda":
                    return args[0] if args[0].device.type == "cpu" and real(args[0]) else args[0].to("meta")
                if name == "to":
                    device = args[1] if len(args) > 1 and isinstance(args[1], (str, torch.device, int)) \
                        else kwargs.get("device")
                    if device is not None and on_cuda(device):
                        target = "cpu" if args[0].device.type == "cpu" and real(args[0]) else "meta"
                        if len(args) > 1 and isinstance(args[1], (str, torch.device, int)):
                            args = (args[0], target) + tuple(args[2:])
                        else:
                            kwargs["device"] = target
                        return func(*args, **kwargs)
                if kwargs.get("device") is not None and on_cuda(kwargs["device"]):
                    kwargs["device"] = "meta"
                    out = func(*args, **kwargs)
                    if isinstance(out, torch.Tensor) and real(out):
                        kwargs["device"] = "cpu"
                        return func(*args, **kwargs)
                    return out
                tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
                if name == "equal" and any(t.device.type == "meta" for t in tensors):
                    return True  # a check on values the stand-in does not have (an inf-mask test): the run goes on
                if any(t.device.type == "meta" for t in tensors) and \
                        any(t.device.type == "cpu" and t.dim() > 0 for t in tensors):
                    args, kwargs = tree_map(to_meta, (args, kwargs))
                return func(*args, **kwargs)

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def _costly(func: Any, args: tuple, kwargs: dict, small: int, limit: int) -> bool:
    """An op on real tensors larger than ``small`` elements that takes more than ``limit`` floating-point
    operations (torch's own count, on ``meta`` copies): run with real values it would hold the run in
    one C call for longer than the run's CPU budget can interrupt."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_map
    from torch.utils.flop_counter import FlopCounterMode
    if not any(isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.numel() > small
               for t in tree_flatten((args, kwargs))[0]):
        return False
    metas = tree_map(lambda t: t.detach().to("meta") if isinstance(t, torch.Tensor) and t.device.type == "cpu"
                     and t.dim() > 0 else t, (args, kwargs))
    try:
        with FlopCounterMode(display=False) as counter:
            func(*metas[0], **metas[1])
    except Exception:  # noqa: BLE001 - no meta kernel (bincount): not a counted product either
        return False
    return counter.get_total_flops() > limit


def _in_storages(value: Any, storages: set[int]) -> bool:
    import torch
    return isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.numel() > 0 and \
        value.untyped_storage().data_ptr() in storages
