"""What training code asks of CUDA, answered on the CPU (the child has no GPU).

Every tensor the code would put on a GPU lives on the CPU here, so every ``cuda`` request is
answered as the CPU would answer it, at the cause rather than per library:

- **devices**: ``device="cuda"`` / ``torch.device("cuda", i)`` / ``.to("cuda")`` / ``.cuda()`` in
  any torch call mean the CPU (a ``TorchFunctionMode`` on the running thread rewrites the device
  before torch's CUDA initialisation would refuse it); ``init_device_mesh("cuda", ...)`` builds a
  CPU mesh; ``torch.cuda.set_device`` does nothing; ``torch.cuda.current_device()`` is the CPU.
- **random state**: the CUDA generator is the CPU default generator, because the tensors that would
  have drawn from it (dropout masks, weights made on the device) are CPU tensors and draw from that
  one.  ``torch.cuda.{get,set}_rng_state``, ``manual_seed(_all)``, ``seed``, ``initial_seed`` act on
  it, so a library's RNG tracker that forks "the CUDA state" (megatron-core's
  ``CudaRNGStatesTracker``, fairscale's and DeepSpeed's copies of it) forks the state those draws
  really use.  Libraries that set the CUDA state through private torch calls get the same
  (``LIBRARY_RNG_HELPERS``).
- **fused kernels**: ``torch.cuda.is_available()`` stays False, which is what most libraries check
  before choosing a fused path.  Where a library has no unfused path for a feature (megatron-core's
  local spec builds sequence-parallel LayerNorm only as apex's ``FusedLayerNorm``), the kernel is
  stood in by the torch op it fuses (``F.layer_norm``), and the library's own module around it runs.

Library modules are patched when they are imported (``_AfterImport``) or, if already loaded, at once.
"""
from __future__ import annotations

import importlib.abc
import sys
import weakref
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def _is_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, str) and (device == "cuda" or device.startswith("cuda:"))


class CudaOnCpu(TorchFunctionMode):
    """Rewrites ``cuda`` devices in torch calls to the CPU (thread-local, like every function mode)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda:
            return args[0]   # already where a CUDA tensor lives here
        if func is torch.device and args and _is_cuda(args[0]):
            return torch.device("cpu")
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs = {**kwargs, "device": torch.device("cpu")}
        if any(_is_cuda(a) for a in args):
            args = tuple(("cpu" if isinstance(a, str) else torch.device("cpu")) if _is_cuda(a) else a for a in args)
        return func(*args, **kwargs)


# generator states handed out (id -> tensor): comparing or copying them is the library's bookkeeping
# (megatron-core's tracker checks "CPU RNG state changed within GPU RNG context"), not the computation
GENERATOR_STATES: "weakref.WeakValueDictionary[int, torch.Tensor]" = weakref.WeakValueDictionary()
_REAL_GET_RNG_STATE = torch.random.get_rng_state


def _state(tensor: torch.Tensor) -> torch.Tensor:
    GENERATOR_STATES[id(tensor)] = tensor
    return tensor


def generator_bookkeeping(args, kwargs, out) -> bool:
    """An op reading only generator states (its outputs are bookkeeping too): the recorder skips it."""
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    if not tensors or not all(GENERATOR_STATES.get(id(t)) is t for t in tensors):
        return False
    for result in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(result, torch.Tensor):
            _state(result)
    return True


def _rng_on_cpu() -> None:
    import torch.cuda.random as cuda_random

    def cpu_get_rng_state() -> torch.Tensor:
        return _state(_REAL_GET_RNG_STATE())

    torch.get_rng_state = torch.random.get_rng_state = cpu_get_rng_state

    def get_rng_state(device: Any = "cuda") -> torch.Tensor:
        return cpu_get_rng_state()

    def set_rng_state(new_state: torch.Tensor, device: Any = "cuda") -> None:
        torch.set_rng_state(new_state)

    def manual_seed(seed: int) -> None:
        torch.default_generator.manual_seed(int(seed))   # torch.manual_seed itself calls manual_seed_all

    replacements = {"get_rng_state": get_rng_state, "set_rng_state": set_rng_state,
                    "get_rng_state_all": lambda: [cpu_get_rng_state()],
                    "set_rng_state_all": lambda states: torch.set_rng_state(states[0]),
                    "manual_seed": manual_seed, "manual_seed_all": manual_seed,
                    "seed": lambda: torch.default_generator.seed(), "seed_all": lambda: torch.default_generator.seed(),
                    "initial_seed": lambda: torch.initial_seed()}
    for name, function in replacements.items():
        setattr(torch.cuda, name, function)
        setattr(cuda_random, name, function)


def _megatron_rng_helpers(module) -> None:
    """megatron-core sets "the CUDA state" through ``torch._C`` / ``default_generators`` inside
    ``torch.cuda._lazy_call`` (queued for ever on a CPU build): its own two helpers, on the CPU state."""
    module._get_cuda_rng_state = lambda device="cuda", clone=False, graph_safe=False: _state(_REAL_GET_RNG_STATE())
    module._set_cuda_rng_state = lambda new_state, device=-1, graph_safe=False: torch.set_rng_state(new_state)
    from .megatron_setup import seed_tracker_on_first_fork

    seed_tracker_on_first_fork(module)


class _TorchLayerNormAffine:
    """apex's ``FusedLayerNormAffineFunction`` (one CUDA kernel for LayerNorm and its affine map),
    stood in by the op it fuses.  Its ``forward`` signature is what megatron-core inspects."""

    @staticmethod
    def forward(ctx, input, weight, bias, normalized_shape, eps, memory_efficient=False):
        return torch.nn.functional.layer_norm(input, tuple(normalized_shape), weight, bias, eps)

    @classmethod
    def apply(cls, input, weight, bias, normalized_shape, eps, memory_efficient=False):
        return cls.forward(None, input, weight, bias, normalized_shape, eps)


def _megatron_fused_layer_norm(module) -> None:
    if not module.HAVE_FUSED_LAYER_NORM and not module.HAVE_PERSIST_LAYER_NORM:
        module.FusedLayerNormAffineFunction = _TorchLayerNormAffine
        module.HAVE_FUSED_LAYER_NORM = True


def _megatron_layer_norm_choice(module) -> None:
    """The local spec's LayerNorm is apex's FusedLayerNorm when apex is there (the GPU set-up);
    without it megatron-core falls back to torch's LayerNorm, which refuses sequence parallelism."""
    from megatron.core.fusions.fused_layer_norm import FusedLayerNorm
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    for name in ("LNImpl", "LayerNormImpl"):
        if getattr(module, name, None) is WrappedTorchNorm:
            setattr(module, name, FusedLayerNorm)


# library modules reaching CUDA below torch's public functions, patched as they are imported
LIBRARY_PATCHES = {
    "megatron.core.tensor_parallel.random": _megatron_rng_helpers,
    "megatron.core.fusions.fused_layer_norm": _megatron_fused_layer_norm,
    "megatron.core.models.backends": _megatron_layer_norm_choice,
    "megatron.core.models.gpt.gpt_layer_specs": _megatron_layer_norm_choice,
    "megatron.core.transformer.transformer_block": _megatron_layer_norm_choice,
}
STOOD_IN: list[str] = []   # library paths stood in during this process (stated in reports)


def library_rng_helpers() -> None:
    """Patch the already-loaded library modules (those imported later are patched by ``_AfterImport``)."""
    for name, patch in LIBRARY_PATCHES.items():
        module = sys.modules.get(name)
        if module is not None and not getattr(module, "_verify_agent_cuda_standin", False):
            patch(module)
            module._verify_agent_cuda_standin = True
            STOOD_IN.append(name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``LIBRARY_PATCHES`` on a library module right after its own code ran."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in LIBRARY_PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                real_exec = spec.loader.exec_module

                def exec_module(module, real_exec=real_exec):
                    real_exec(module)
                    library_rng_helpers()

                spec.loader.exec_module = exec_module
                return spec
        return None


def map_cuda_to_cpu() -> None:
    """Answer CUDA requests on the CPU for the rest of this thread's run (idempotent)."""
    import torch.distributed.device_mesh as device_mesh

    real_mesh = getattr(device_mesh.init_device_mesh, "__wrapped__", device_mesh.init_device_mesh)

    def init_device_mesh(device_type, *args, **kwargs):
        return real_mesh("cpu" if str(device_type).startswith("cuda") else device_type, *args, **kwargs)

    init_device_mesh.__wrapped__ = real_mesh
    device_mesh.init_device_mesh = init_device_mesh
    torch.cuda.set_device = lambda *args, **kwargs: None
    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.synchronize = lambda *args, **kwargs: None
    _rng_on_cpu()
    if not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
    library_rng_helpers()
    # ``model.to(torch.float64)`` / ``.cuda()`` make new Parameter objects over the converted values
    # instead of swapping ``param.data`` (a swap bumps version counters without a recorded op)
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    from torch.overrides import _get_current_function_mode_stack

    if not any(isinstance(mode, CudaOnCpu) for mode in _get_current_function_mode_stack()):
        CudaOnCpu().__enter__()   # left on this thread's stack: the run's thread ends with it
