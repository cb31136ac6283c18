"""Every distributed entry of a library file: what ``translate FILE`` checks without ``--entry``.

An entry is a public ``nn.Module`` class or function defined in the file that is distributed: its
source calls a torch.distributed collective, reads the rank, world size or a process group, builds
DTensors, or names something else that does (a parallel layer, a mapping function, an autograd
``Function``), followed through the file's globals into the same package.  Autograd Functions are
reached through the functions and modules that apply them, never entries themselves.  Helpers are
not entries: private names (``_split``), factories (``*_factory``, functions returning a nested
function) and functions that take no tensor.

Read from the source of the live objects (``inspect``) with ``ast``; nothing is evaluated, and the
only code run is the import of the file, which the caller does in the sandboxed child.
"""
from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
import types

import torch

from .found import Candidate

# torch.distributed functions that communicate, or say who the rank is and with whom
_COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all", "all_to_all_single", "broadcast", "reduce",
    "gather", "scatter", "send", "recv", "isend", "irecv", "batch_isend_irecv", "P2POp", "barrier",
    "all_reduce_coalesced", "permute_tensor", "wait_tensor"})
_GROUP_QUERIES = frozenset({"get_rank", "get_world_size", "new_group", "ProcessGroup", "get_process_group_ranks",
                            "init_device_mesh", "DeviceMesh", "get_global_rank", "get_group_rank"})
_DTENSOR = frozenset({"parallelize_module", "distribute_tensor", "distribute_module", "DTensor", "ColwiseParallel",
                      "RowwiseParallel", "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput",
                      "loss_parallel", "from_local"})
# a package's own process-group helpers: get_tensor_model_parallel_world_size, get_sequence_parallel_group ...
_PARALLEL_STATE = re.compile(r"^_?get_\w*(parallel|model|_tp|_sp|_cp|_dp|_ep)\w*_(group|rank|world_size)\w*$|"
                             r"^(tp|sp|cp|dp|pp|ep)_group$")
_TENSOR_NAMES = re.compile(r"^(input_?|inputs?|x|xs?|tensor|t|hidden(_states)?|logits|\w*_logits|q|k|v|query|key|"
                           r"value|grad\w*|output|out|\w+_states|tokens?|input_ids|ids|idx|target|labels?|"
                           r"\w*tensor\w*|inp|h|y|act\w*|emb\w*|activations?)$")
_MAX_DEPTH = 6


CONVENTIONS = ("forward", "build", "example_module", "example_inputs", "example_args")


def follows_conventions(module: types.ModuleType) -> bool:
    """The file defines one of the entry points of a driver written for this tool."""
    return any(callable(vars(module).get(name)) for name in CONVENTIONS)


def discover(module: types.ModuleType) -> list[Candidate]:
    """The distributed entries defined in ``module``, in source order."""
    package = (module.__name__ or "").split(".")[0]
    found, memo = [], {}
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
            why = _why(obj, package, memo, 0)
            if why:
                found.append(Candidate(name, "module", _line(obj), why))
        elif inspect.isfunction(obj) and not _helper(obj):
            why = _why(obj, package, memo, 0)
            if why:
                found.append(Candidate(name, "function", _line(obj), why))
    return sorted(found, key=lambda c: (c.line or 0, c.name))


def _line(obj) -> int | None:
    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return None


def _helper(fn) -> bool:
    """A factory, or a function that takes no tensor."""
    if fn.__name__.endswith("_factory") or fn.__name__.startswith(("init", "initialize", "destroy", "get_", "set_",
                                                                   "register_", "is_", "main")):
        return True
    tree = _tree(fn)
    if tree is not None and _returns_nested_function(tree):
        return True
    return not _takes_tensor(fn)


def _takes_tensor(fn) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    for param in params:
        hint = param.annotation
        text = "" if hint is inspect.Parameter.empty else (hint if isinstance(hint, str) else
                                                             getattr(hint, "__name__", None) or str(hint))
        if "Tensor" in str(text) or "tensor" in str(text):
            return True
        if hint is inspect.Parameter.empty and _TENSOR_NAMES.match(param.name):
            return True
    return False


def _returns_nested_function(tree: ast.AST) -> bool:
    function = tree.body[0] if isinstance(tree, ast.Module) and tree.body else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    nested = {node.name for node in ast.walk(function) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              and node is not function}
    return any(isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in nested
               for node in ast.walk(function))


def _tree(obj) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _why(obj, package: str, memo: dict, depth: int) -> str | None:
    """Why ``obj`` is distributed (a short phrase), or None."""
    key = id(obj)
    if key in memo:
        return memo[key]
    memo[key] = None   # a cycle is not evidence
    tree = _tree(obj)
    if tree is None or depth > _MAX_DEPTH:
        return None
    scope = getattr(sys.modules.get(getattr(obj, "__module__", "") or ""), "__dict__", {})
    reason = None
    for node in ast.walk(tree):
        reason = _direct(node, scope) or (_through(node, scope, package, memo, depth) if reason is None else None)
        if reason:
            break
    memo[key] = reason
    return reason


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _resolve(parts: list[str], scope: dict):
    value = scope.get(parts[0], getattr(__builtins__, parts[0], None) if not isinstance(__builtins__, dict)
                      else __builtins__.get(parts[0]))
    for part in parts[1:]:
        if value is None:
            return None
        try:
            value = inspect.getattr_static(value, part) if not isinstance(value, types.ModuleType) \
                else getattr(value, part, None)
        except AttributeError:
            return None
    return value


def _from_torch_distributed(value) -> bool:
    module = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None) or ""
    return module.startswith("torch.distributed") or module.startswith("torch._C._distributed")


def _direct(node: ast.AST, scope: dict) -> str | None:
    """A collective, a group query or DTensor named at this node."""
    if isinstance(node, ast.Name) and _PARALLEL_STATE.search(node.id):
        return f"uses the parallel state ({node.id})"
    if not isinstance(node, (ast.Attribute, ast.Name)):
        return None
    parts = _dotted(node)
    if not parts:
        return None
    last = parts[-1]
    if isinstance(node, ast.Attribute) and _PARALLEL_STATE.search(last):
        return f"uses the parallel state ({last})"
    if last not in _COLLECTIVES | _GROUP_QUERIES | _DTENSOR:
        return None
    value = _resolve(parts, scope)
    owner = _resolve(parts[:-1], scope) if len(parts) > 1 else None
    if (value is not None and _from_torch_distributed(value)) or (owner is not None and _from_torch_distributed(owner)):
        if last in _COLLECTIVES:
            return f"calls {'.'.join(parts[-2:]) if len(parts) > 1 else last}"
        if last in _DTENSOR:
            return f"uses DTensor ({last})"
        return f"reads the process group ({last})"
    return None


def _through(node: ast.AST, scope: dict, package: str, memo: dict, depth: int) -> str | None:
    """A name of the same package that is itself distributed (a parallel layer, a mapping function,
    an autograd Function)."""
    if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(getattr(node, "ctx", None), ast.Load):
        return None
    parts = _dotted(node)
    if not parts or (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                     and _dotted(node.value) is None):
        return None
    value = _resolve(parts, scope)
    if value is None or isinstance(value, types.ModuleType):
        return None
    if not (inspect.isfunction(value) or inspect.isclass(value)) or _is_config(value):
        return None
    home = (getattr(value, "__module__", None) or "").split(".")[0]
    if not package or home != package:
        return None
    inner = _why(value, package, memo, depth + 1)
    if inner is None:
        return None
    root = inner.split(" -> ")[-1]
    name = getattr(value, "__name__", parts[-1])
    if inspect.isclass(value) and issubclass(value, torch.autograd.Function):
        return f"applies {name} -> {root}"
    if inspect.isclass(value) and issubclass(value, torch.nn.Module):
        return f"holds {name} -> {root}"
    return f"calls {name} -> {root}"


def _is_config(value) -> bool:
    """A configuration class (a dataclass, ``*Config``/``*Args``): reading one is not communicating."""
    import dataclasses

    return inspect.isclass(value) and (dataclasses.is_dataclass(value)
                                        or value.__name__.endswith(("Config", "Args", "Submodules", "Spec")))
