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


@dataclass
class Capture:
    instances: list[Instance] = field(default_factory=list)
    namespace: dict[str, Any] = field(default_factory=dict)
    stopped_by: str = ""


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
        return _StubKernel()

    def tilelang_compile(func: Any, *args: Any, **kwargs: Any) -> Any:
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
    for name in ("synchronize", "empty_cache", "manual_seed", "manual_seed_all", "set_device"):
        patches.append((torch.cuda, name, lambda *a, **k: None))

    saved = [(owner, name, owner.__dict__.get(name, getattr(owner, name, None))) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Stop()

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__}
    old_argv = sys.argv
    sys.argv = [path]
    sys.path.insert(0, path.rsplit("/", 1)[0] if "/" in path else ".")
    try:
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec")
        with _MetaDevice(), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(code, namespace)  # noqa: S102 - the documented tracing frontend, in its child process
        capture.stopped_by = "end of file"
    except _Stop:
        capture.stopped_by = f"time budget ({budget:.0f} s)"
    except BaseException as exc:  # the user's run ends at its first error; what it asked for is kept
        capture.stopped_by = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        sys.argv = old_argv
        sys.path.pop(0)
        for owner, name, value in saved:
            setattr(owner, name, value)
    capture.namespace = namespace
    return capture


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
