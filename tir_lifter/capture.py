"""Run a kernel file's own ``__main__`` and record every kernel it asks TileLang for.

Runs only inside the elaboration child process (``elaborate.py``): it executes user code.
The file runs as ``__main__`` with ``sys.argv = [file]`` (argparse defaults apply) while:

* ``@tilelang.jit`` calls and ``.compile(...)``, ``tilelang.compile(prim_func)`` and
  autotuned kernels record their arguments (an :class:`Instance`) instead of compiling,
  and hand back a stand-in kernel whose launches return nothing;
* torch tensors asked for on ``cuda`` are made on the ``meta`` device (shapes only: the
  file's own big reference computations cost nothing), benchmarks return a fixed time;
* the run stops at the first error or after ``budget`` seconds; what was recorded until
  then is kept (a reference check failing on meta tensors is the usual end).
"""
from __future__ import annotations

import contextlib
import inspect
import io
import signal
import sys
import types
from dataclasses import dataclass, field
from typing import Any


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


@dataclass
class Capture:
    instances: list[Instance] = field(default_factory=list)
    namespace: dict[str, Any] = field(default_factory=dict)
    stopped_by: str = ""


_FAKE_GPU = type("FakeGpuProperties", (), dict(
    name="NVIDIA H100", major=9, minor=0, multi_processor_count=132, shared_memory_per_block=49152,
    shared_memory_per_block_optin=232448, shared_memory_per_multiprocessor=233472, total_memory=80 * 2 ** 30,
    warp_size=32, max_threads_per_multi_processor=2048, regs_per_multiprocessor=65536, L2_cache_size=50 * 2 ** 20))()


class _Stop(BaseException):
    """Ends the user's run (time budget)."""


def _def_line(func: Any, path: str) -> int | None:
    try:
        if inspect.getsourcefile(func) and inspect.getsourcefile(func).endswith(path.split("/")[-1]):
            return inspect.getsourcelines(func)[1]
    except (OSError, TypeError):
        return None
    return None


class _StubProfiler:
    def do_bench(self, *args: Any, **kwargs: Any) -> float:
        return 1.0

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class _StubKernel:
    """What a recorded compile hands back: launches return None, benchmarks a fixed time."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def get_profiler(self, *args: Any, **kwargs: Any) -> _StubProfiler:
        return _StubProfiler()

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        return ""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def run_file(path: str, budget: float) -> Capture:
    """Execute ``path`` as ``__main__`` under the recording patches."""
    import tilelang
    import torch
    from tilelang.jit import JITImpl

    capture = Capture()
    seen: set[str] = set()
    produced: list[Any] = []  # PrimFuncs returned by recorded factory calls

    def record(instance: Instance) -> None:
        key = f"{instance.name}|{instance.args!r}|{instance.kwargs!r}|{id(instance.primfunc)}"
        if key not in seen:
            seen.add(key)
            capture.instances.append(instance)

    def jit_instance(jit: Any, args: tuple, kwargs: dict, origin: str) -> Instance:
        func = getattr(jit.func, "orig_func", jit.func)
        return Instance(getattr(func, "__name__", "kernel"), _def_line(func, path), jit, tuple(args),
                        tuple(sorted(kwargs.items())), None, origin)

    def jit_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("__return_compile_arguments", None)
        kwargs.update(kwargs.pop("__tune_params", {}))
        record(jit_instance(self, args, kwargs, "call"))
        try:
            eager = self._infer_jit_mode(*args, **kwargs) == "eager"
        except Exception:  # noqa: BLE001 - undecidable: treat as lazy (a kernel object)
            eager = False
        return _eager_outputs(self, args, kwargs) if eager else _StubKernel()

    def tilelang_compile(func: Any, *args: Any, **kwargs: Any) -> Any:
        if any(func is made for made in produced):  # its factory call is recorded already
            return _StubKernel()
        name = getattr(func, "__name__", None) or str(getattr(func, "attrs", {}).get("global_symbol", "kernel")
                                                       if getattr(func, "attrs", None) else "kernel")
        record(Instance(name, None, None, (), (), func, "tilelang.compile"))
        return _StubKernel()

    def autotune_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("__return_kernel", None)
        configs = self.configs
        if callable(configs):
            try:
                params = inspect.signature(configs).parameters
                bound = self.jit_impl.signature.bind_partial(*args, **kwargs).arguments
                configs = configs(**{k: v for k, v in bound.items() if k in params})
            except Exception:  # a config generator that needs a GPU: no configs known
                configs = []
        for index, config in enumerate(list(configs or [])):
            merged = dict(kwargs)
            merged.update(dict(config))
            record(jit_instance(self.jit_impl, args, merged, f"autotune config {index}"))
        return _StubKernel()

    patches: list[tuple[Any, str, Any]] = [(JITImpl, "__call__", jit_call), (JITImpl, "compile", jit_call),
                                           (tilelang, "compile", tilelang_compile)]
    try:
        from tilelang.autotuner.tuner import AutoTuneImpl
        patches.append((AutoTuneImpl, "__call__", autotune_call))
        patches.append((AutoTuneImpl, "compile", autotune_call))
    except ImportError:
        pass
    try:
        import tilelang.profiler as profiler
        patches.append((profiler, "do_bench", lambda *a, **k: 1.0))
    except ImportError:
        pass
    # comparisons of (meta) kernel outputs with the file's own reference are not ours to run
    patches += [(torch.testing, "assert_close", lambda *a, **k: None), (torch, "allclose", lambda *a, **k: True)]
    try:
        import tilelang.testing as tl_testing
        patches.append((tl_testing, "torch_assert_close", lambda *a, **k: None))
        import tilelang.utils.tensor as tl_tensor
        patches.append((tl_tensor, "torch_assert_close", lambda *a, **k: None))
    except (ImportError, AttributeError):
        pass
    for name in ("synchronize", "empty_cache", "manual_seed", "manual_seed_all", "set_device"):
        patches.append((torch.cuda, name, lambda *a, **k: None))
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
    except ImportError:
        pass

    for owner, name, value in patches:
        setattr(owner, name, value)

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Stop()

    from tvm import tirx
    calls: dict[int, dict[str, Any]] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        # plain factories of the file (``def matmul(M, ...): ... return main``): record the
        # call's arguments when it returns a PrimFunc
        code = frame.f_code
        if code.co_filename != path:
            return
        if event == "call":
            calls[id(frame)] = {n: frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount]}
        elif event == "return":
            args = calls.pop(id(frame), None)
            func = frame.f_globals.get(code.co_name)
            if isinstance(arg, tirx.PrimFunc) and args is not None and getattr(func, "__code__", None) is code:
                produced.append(arg)
                record(Instance(code.co_name, code.co_firstlineno, None, (), tuple(sorted(args.items())), None,
                                "call", func))

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
        with _MetaDevice(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            sys.setprofile(profile)
            try:
                exec(code, namespace)  # noqa: S102 - the documented tracing frontend, in its child process
            finally:
                sys.setprofile(None)
        capture.stopped_by = "end of file"
    except _Stop:
        capture.stopped_by = f"time budget ({budget:.0f} s)"
    except BaseException as exc:  # the user's run ends at its first error; what it asked for is kept
        capture.stopped_by = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old_handler)
        sys.argv = old_argv  # the user's module stays __main__: TileLang finds kernel globals through it
        for owner, name, value in saved:
            setattr(owner, name, value)
    capture.namespace = namespace
    return capture


def _eager_outputs(jit: Any, args: tuple, kwargs: dict) -> Any:
    """What an eager kernel launch returns: its ``T.empty`` outputs, as meta tensors."""
    import torch
    try:
        func = jit.get_tir(*args, **kwargs)
        outputs = []
        for param in func.params:
            buffer = func.buffer_map.get(param)
            if buffer is None or buffer.name in jit.signature.parameters:
                continue
            dtype = getattr(torch, str(buffer.dtype).replace("float8_e4m3", "float8_e4m3fn").replace("fnfn", "fn"),
                            torch.float32)
            outputs.append(torch.empty([int(d) for d in buffer.shape], dtype=dtype, device="meta"))
    except Exception:  # noqa: BLE001 - the run goes on without outputs
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _device_arg(value: Any) -> Any:
    text = str(value)
    return "meta" if text.startswith("cuda") or text.isdigit() else value


class _MetaDevice:
    """A torch function mode that makes ``cuda`` tensors on ``meta`` (shapes, no data)."""

    def __enter__(self) -> "_MetaDevice":
        import torch
        from torch.overrides import TorchFunctionMode

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
                kwargs = dict(kwargs or {})
                if "device" in kwargs and kwargs["device"] is not None:
                    kwargs["device"] = _device_arg(kwargs["device"])
                name = getattr(func, "__name__", "")
                if name == "cuda":
                    return args[0].to("meta")
                if name == "to" and len(args) > 1 and isinstance(args[1], (str, torch.device)):
                    args = (args[0], _device_arg(args[1])) + tuple(args[2:])
                return func(*args, **kwargs)

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)
