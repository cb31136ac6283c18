"""What to run in the user's file, and with which arguments.

Entries, in order of precedence: ``--entry NAME`` or ``--entry "Cls(hidden=16, ffn=64)"``
(the arguments are read with ``ast.literal_eval``, never evaluated); ``build(mesh)``;
``forward(...)``; an ``nn.Module`` class (constructed by ``example_module()``, else
``example_args()``, else from what ``harness.py`` builds: defaults, type hints, config classes).
Inputs come from ``example_inputs()``, ``--input x=8x16`` or ``harness.py`` (shapes from the
module's own sizes); parameters with defaults keep their defaults (``dropout_p=0.0``,
``softmax_scale=None``): ``--arg NAME=LITERAL`` gives any parameter a value (read with
``ast.literal_eval``, never evaluated).
"""
from __future__ import annotations

import ast
import functools
import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from . import harness, literals, styles, transforms

class EntryError(Exception):
    """The file does not say what to run (a usage error, exit 2)."""


@dataclass(frozen=True)
class EntrySpec:
    kind: str                  # "build" | "forward" | "module" | "function"
    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


def parse_entry(text: str | None) -> tuple[str | None, tuple, dict]:
    """``Cls(hidden=16)`` -> ("Cls", (), {"hidden": 16}); literal arguments only."""
    if not text:
        return None, (), {}
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise EntryError(f"--entry {text!r} is not a name or a call with literal arguments") from error
    if isinstance(tree, ast.Name):
        return tree.id, (), {}
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name):
        try:
            args = tuple(ast.literal_eval(a) for a in tree.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in tree.keywords if k.arg}
        except ValueError as error:
            raise EntryError(f"--entry {text!r}: arguments must be literals (numbers, strings, lists)") from error
        return tree.func.id, args, kwargs
    raise EntryError(f"--entry {text!r} is not a name or a call with literal arguments")


def entry_function(module, name: str):
    """The callable a function entry names.  A custom ``torch.autograd.Function`` is entered as its users
    enter it, through ``Cls.apply``, with the parameters of its ``forward`` after ``ctx`` (calling the
    class itself only makes a Function object: nothing would run)."""
    obj = getattr(module, name)
    if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function):
        return applied(obj)
    return obj


def applied(cls: type) -> Any:
    """``cls.apply`` with the signature (and type hints) of ``cls.forward`` without its ``ctx``."""
    forward = cls.forward

    @functools.wraps(forward)
    def apply(*args):
        return cls.apply(*args)

    signature = inspect.signature(forward)
    params = list(signature.parameters.values())
    separate_context = getattr(cls, "setup_context", None) is not torch.autograd.Function.setup_context
    apply.__signature__ = signature.replace(parameters=params if separate_context else params[1:])
    return apply


def _own_module_classes(module) -> list[type]:
    return [obj for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, torch.nn.Module) and obj.__module__ == module.__name__]


def find_entry(module, entry: str | None) -> EntrySpec:
    name, args, kwargs = parse_entry(entry)
    if name is not None:
        obj = getattr(module, name, None)
        if obj is None:
            raise EntryError(f"--entry {name}: no such function or class in the file")
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
            return EntrySpec("module", name, args, kwargs)
        if styles.is_parallel_style(obj):
            return EntrySpec("style", name, args, kwargs)
        if transforms.is_transform(obj):
            return EntrySpec("transform", name)
        if name == "build":
            return EntrySpec("build", name)
        if callable(obj):
            return EntrySpec("function", name)
        raise EntryError(f"--entry {name} is neither a function nor an nn.Module class")
    if callable(getattr(module, "build", None)):
        return EntrySpec("build", "build")
    if callable(getattr(module, "forward", None)) and not inspect.isclass(getattr(module, "forward")):
        return EntrySpec("function", "forward")
    if callable(getattr(module, "example_module", None)):
        return EntrySpec("module", "example_module")
    classes = _own_module_classes(module)
    used = _classes_used_by_others(module, [c.__name__ for c in classes])
    top = [cls for cls in classes if cls.__name__ not in used]
    if len(top) == 1:
        return EntrySpec("module", top[0].__name__)
    if not top:
        raise EntryError("no entry found: define forward(...), build(mesh), an nn.Module class, or pass --entry")
    raise EntryError(f"several module classes ({', '.join(c.__name__ for c in top)}): choose one with --entry")


def _classes_used_by_others(module, names: list[str]) -> set[str]:
    """Module classes named inside another module class: submodules, not the entry."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return set()
    used = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in names:
            used |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in names and n.id != node.name}
    return used


def input_features(cls: type, shapes: dict[str, tuple[int, ...]] | None) -> int | None:
    """The last dim of the first ``forward`` input the user gave a shape for (``--input input_=4x2x32``)."""
    forward = getattr(cls, "forward", None)
    try:
        params = list(inspect.signature(forward).parameters)[1:] if forward is not None else []
    except (TypeError, ValueError):
        return None
    for name in params:
        shape = (shapes or {}).get(name)
        if shape:
            return int(shape[-1])
    return None


def construct_style(module, spec: EntrySpec, world: int, shapes: dict | None = None) -> torch.nn.Module:
    """A parallel style applied to a linear of the given input's width (``styles.py``)."""
    style = getattr(module, spec.name)(*spec.args, **spec.kwargs)
    return styles.applied_to_linear(style, input_features(torch.nn.Linear, shapes), world)


def construct_transformed(module, spec: EntrySpec, world: int, shapes: dict | None, args: dict | None
                          ) -> torch.nn.Module:
    """The module a parallelizing function returns or changes in place (``transforms.py``)."""
    fn = getattr(module, spec.name)
    own, _ = transforms.own_arguments(fn, dict(args or {}))
    cls = harness.resolved_hint(fn, transforms.module_parameter(fn))
    try:
        return transforms.transformed(fn, world, input_features(cls, shapes), own)
    except harness.Unbuildable as error:
        raise EntryError(f"{spec.name}: {error}") from error


def forward_arguments(module, spec: EntrySpec, args: dict | None) -> dict:
    """The ``--arg`` values for the traced call (a parallelizing function's own are its, not the module's)."""
    if spec.kind != "transform":
        return dict(args or {})
    return transforms.own_arguments(getattr(module, spec.name), dict(args or {}))[1]


def construct_module(module, spec: EntrySpec, world: int = 1, shapes: dict | None = None) -> torch.nn.Module:
    if spec.name == "example_module":
        return module.example_module()
    cls = getattr(module, spec.name)
    example_args = getattr(module, "example_args", None)
    if callable(example_args) and not (spec.args or spec.kwargs):
        value = example_args()
        if isinstance(value, dict):
            return cls(**value)
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
            return cls(*value[0], **value[1])
        return cls(*(value if isinstance(value, (tuple, list)) else (value,)))
    try:   # what nobody gave is built from defaults, type hints and config classes (harness.py)
        built = harness.constructor_arguments(cls, spec.kwargs, len(spec.args), world, input_features(cls, shapes))
    except harness.Unbuildable as error:
        raise EntryError(f"{spec.name}: {error}") from error
    return cls(*spec.args, **{**built, **spec.kwargs})


def parse_arg(text: str) -> tuple[str, Any]:
    """``causal=True`` -> ("causal", True) (``literals.parse_arg``), a usage error as an ``EntryError``."""
    try:
        return literals.parse_arg(text)
    except ValueError as error:
        raise EntryError(str(error)) from error


def _positional_parameters(fn) -> list[inspect.Parameter]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _check_args(fn, args: dict) -> None:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    for name in args:
        if name not in params:
            raise EntryError(f"--arg {name}: the entry has no parameter of that name "
                             f"(parameters: {', '.join(params) or 'none'})")
        if params[name].kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise EntryError(f"--arg {name}: only parameters that can be passed by position can be given")


def tensor_parameters(fn) -> list[inspect.Parameter]:
    """Parameters of ``fn`` that take inputs: positional, without a default."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.default is inspect.Parameter.empty]


def explicitly_not_trainable(module) -> set[int]:
    """Positions of ``example_inputs()``'s results the file itself makes non-trainable: written with
    ``requires_grad=False``, ``.requires_grad_(False)`` or ``NAME.requires_grad = False``.  A plain
    ``torch.randn(...)`` is trainable (its ``requires_grad`` is False only by default)."""
    maker = getattr(module, "example_inputs", None)
    try:
        tree = ast.parse(inspect.getsource(maker)) if callable(maker) else None
    except (OSError, TypeError, SyntaxError, IndentationError):
        return set()
    function = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(function, ast.FunctionDef):
        return set()
    returned = [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and node.value is not None]
    if len(returned) != 1:
        return set()
    elements = returned[0].elts if isinstance(returned[0], (ast.Tuple, ast.List)) else [returned[0]]
    frozen_names = {target.value.id for node in ast.walk(function) if isinstance(node, ast.Assign)
                    for target in node.targets
                    if isinstance(target, ast.Attribute) and target.attr == "requires_grad"
                    and isinstance(target.value, ast.Name) and _is_false(node.value)}
    assigned = {target.id: node.value for node in ast.walk(function) if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)}
    out = set()
    for index, element in enumerate(elements):
        if isinstance(element, ast.Name):
            if element.id in frozen_names or _opts_out(assigned.get(element.id)):
                out.add(index)
        elif _opts_out(element):
            out.add(index)
    return out


def _is_false(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _opts_out(expression) -> bool:
    """``requires_grad=False`` or ``.requires_grad_(False)`` anywhere in the expression."""
    for node in ast.walk(expression) if expression is not None else ():
        if isinstance(node, ast.Call):
            if any(k.arg == "requires_grad" and _is_false(k.value) for k in node.keywords):
                return True
            if isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_" \
                    and node.args and _is_false(node.args[0]):
                return True
    return False


def example_inputs(module, fn, shapes: dict[str, tuple[int, ...]], args: dict | None = None, world: int = 1
                   ) -> tuple[list[str], list[Any]]:
    """(names, values) of the entry's inputs: ``example_inputs()``'s values, else ``--input`` shapes
    (random tensors), ``--arg`` literals, and what ``harness.py`` builds for the rest; defaults for the
    parameters between the given ones."""
    args = dict(args or {})
    _check_args(fn, args)
    params = tensor_parameters(fn)
    names = [p.name for p in params]
    maker = getattr(module, "example_inputs", None)
    if not callable(maker):   # a mesh left at None runs nothing distributed: the simulated world's
        unset = [p for p in _positional_parameters(fn) if p.name not in args]
        args.update(harness.default_meshes(fn, unset, world))
    if callable(maker):
        values = maker()
        values = list(values) if isinstance(values, (tuple, list)) else [values]
        names = names[:len(values)] + [f"input{i}" for i in range(len(names), len(values))]
        for index, name in enumerate(names):
            if name in shapes:
                values[index] = torch.randn(shapes[name])
            if name in args:
                values[index] = args[name]
        return _with_given_defaults(fn, names, values, args)
    names, values, missing = [], [], []
    for param in params:
        if param.name in args:
            value = args[param.name]
        elif param.name in shapes:
            value = torch.randn(shapes[param.name])
        else:
            missing.append(param)
            continue
        names.append(param.name)
        values.append(value)
    if missing:   # built from the entry's own sizes and type hints (harness.py)
        try:
            given_shape = next((shapes[n] for n in names if n in shapes and shapes[n]), None)
            made = dict(harness.call_arguments(fn, getattr(fn, "__self__", None), missing, world, given_shape))
        except harness.Unbuildable as error:
            raise EntryError(str(error)) from error
        order = [p.name for p in params if p.name in made or p.name in names]
        given = dict(zip(names, values))
        names, values = order, [made[n] if n in made else given[n] for n in order]
    return _with_given_defaults(fn, names, values, args)


def _with_given_defaults(fn, names: list[str], values: list[Any], args: dict) -> tuple[list[str], list[Any]]:
    """Parameters after the inputs that ``--arg`` names, in order: the defaults between them kept."""
    later = _positional_parameters(fn)[len(names):]
    last = max((i for i, p in enumerate(later) if p.name in args), default=-1)
    for param in later[:last + 1]:
        names.append(param.name)
        values.append(args[param.name] if param.name in args else param.default)
    return names, values
