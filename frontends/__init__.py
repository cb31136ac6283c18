"""Source -> IR.  ``translate_source`` reads a model file in one of three styles:

* ``explicit``: plain ``torch.distributed`` (ranks, collectives, point-to-point);
* ``megatron``: Megatron-core parallel layers and mappings (any file importing ``megatron.core``);
* ``dtensor``: DTensor plans (``torch.distributed.tensor(.parallel)``, ``parallelize_module``).

All three share one reader (``interpreter.py``) and one torch-op table (``torch_ops.py``); the
style modules add their idioms to the tables in ``library.py``.
"""
from __future__ import annotations

import sympy as sp

from verifier.placements import Replicate

from .sizes import to_sym
from . import dtensor, explicit, megatron, nn_modules, torch_ops  # noqa: F401  (register their idioms)
from .base import SourceError, Translation, Unsupported
from .builder import Builder
from .coverage import uncovered_constructs
from .entry import DEFAULT_MESH, example_inputs, find_entry, infer_mesh, override_shape, parse_mesh
from .interpreter import FunctionObj, Interpreter
from .source import parse, style_of
from .symbolic import Dims
from .values import ModuleObj, Tensor, UnsupportedError, UserError

__all__ = ["translate_source", "Translation", "Unsupported", "SourceError"]


def translate_source(source: str, path: str, *, entry: str | None = None, mesh: str | None = None,
                     inputs: dict[str, list[int]] | None = None) -> Translation:
    """Translate a model file to an IR program (see ``docs/ir.md``).

    Raises ``SourceError`` for mistakes in the file or the options; constructs the frontend
    does not model are returned as ``Translation.unsupported`` entries (no program then).
    """
    try:
        src = parse(source, path)
        style = style_of(src)
        the_mesh = parse_mesh(mesh) if mesh else (infer_mesh(src) or DEFAULT_MESH)
        name, kind = find_entry(src, entry)
    except UserError as error:
        raise SourceError(path, error.line, error.message) from None
    dims = Dims(the_mesh)
    builder = Builder(the_mesh, dims, source=path)
    it = Interpreter(src, builder, dims)
    try:
        outputs = _run(it, src, name, kind, inputs or {}, path)
        program = builder.program(outputs)
    except UserError as error:
        raise SourceError(path, error.line or it.current_line, error.message) from None
    except UnsupportedError as error:
        return Translation(None, style, name, [Unsupported(error.line, error.construct, error.reason)],
                           notes=it.notes, backward_bodies=it.backward_bodies)
    except RecursionError:
        return Translation(None, style, name, [Unsupported(it.current_line, name, "the program nests too deeply")],
                           notes=it.notes, backward_bodies=it.backward_bodies)
    except Exception as error:  # noqa: BLE001 - a frontend bug must not hide the file from the LLM path
        reason = f"internal error of the frontend ({type(error).__name__}: {error})"
        return Translation(None, style, name, [Unsupported(it.current_line, "frontend", reason)],
                           notes=it.notes, backward_bodies=it.backward_bodies)
    return Translation(program, style, name, [], ["frontend"] * len(program.ops), notes=it.notes,
                       backward_bodies=it.backward_bodies, reference_caveats=list(it.reference_caveats),
                       uncovered=uncovered_constructs(src, it.executed_lines),
                       untranslated_backwards=list(it.untranslated_backwards))


def _run(it: Interpreter, src, name: str, kind: str, overrides: dict[str, list[int]], path: str) -> list:
    node = src.functions.get(name) if kind != "module" else src.classes[name]
    specs = example_inputs(it, src)
    if kind == "build":
        from .values import MeshObj
        built = it.call_function(FunctionObj(node, it.globals.root), [MeshObj(it.dims.mesh.names)], {}, node)
        if isinstance(built, FunctionObj):
            target, params, params_node = built, _params(built.node, False), built.node
        elif isinstance(built, ModuleObj):
            forward = it.class_lookup(built.cls, "forward") if built.cls is not None else None
            target, params = built, _params(forward.node, True) if isinstance(forward, FunctionObj) else ["x"]
            params_node = node
        else:
            raise UserError(src.line(node), "build(mesh) must return the parallelized callable (a function or module)")
    elif kind == "module":
        target = it.instantiate(it.globals.lookup(name), [], {}, node)
        forward = it.class_lookup(target.cls, "forward")
        if not isinstance(forward, FunctionObj):
            raise UserError(src.line(node), f"class {name} has no forward()")
        params, params_node = _params(forward.node, True), forward.node
    else:
        target, params, params_node = FunctionObj(node, it.globals.root), _params(node, False), node
    tensors = _inputs(it, src, params, specs, overrides, params_node)
    if isinstance(target, FunctionObj):
        result = it.call_function(target, tensors, {}, params_node)
    else:
        result = it.call_module(target, tensors, {}, params_node)
    outputs = _outputs(it, result, params_node)
    if it.uses_custom_backward or it.megatron_autograd:
        _declare_gradients(it, tensors + [t for _, t in it.param_inputs])
    return outputs


def _declare_gradients(it: Interpreter, inputs: list[Tensor]) -> None:
    """Check gradients when the communication is autograd-aware (custom autograd.Function, Megatron).

    Like the ground-truth runner: an input every rank reads only through its own block
    (``x.chunk(world)[rank]``) has gradients with disjoint supports per rank, whose sum is the
    gradient; a parameter is expected placed like its value; any other input must get the
    whole gradient on every rank.  Parameters marked ``sequence_parallel`` (Megatron) get the
    all-reduce of Megatron's gradient finalisation.
    """
    from verifier.placements import Partial
    consumers: dict[str, list] = {}
    for record in it.builder.ops:
        for arg in record.args:
            consumers.setdefault(arg, []).append(record)
    for tensor in inputs:
        if tensor.dtype not in ("f32", "f16", "bf16", "f64") or tensor.name not in consumers:
            continue
        users = consumers[tensor.name]
        if tensor.param is not None:
            value = f"grad_{tensor.name}"
            if tensor.__dict__.get("meta", {}).get("sequence_parallel") and "tp" in it.dims.mesh.names:
                (value,), record = it.builder.emit("all_reduce", [value], {"mesh_dim": "tp", "op": "sum"},
                                                   tensor.param.line, unconditional=True)
                it.builder.ops.remove(record)
                it.builder.backward_ops.append(record)
            it.builder.gradients.append((tensor.name, value, (), tensor.param.line))
            continue
        placements = []
        for mesh_dim in it.dims.mesh.names:
            blocked = all(r.kind == "local_chunk" and r.attrs.get("mesh_dim") == mesh_dim and "grad" not in r.attrs
                          for r in users)
            placements.append(Partial("sum") if blocked else Replicate())
        declared = tuple(placements) if any(not isinstance(p, Replicate) for p in placements) else ()
        line = next((spec.span.line for spec in it.builder.inputs if spec.name == tensor.name), None)
        it.builder.gradients.append((tensor.name, f"grad_{tensor.name}", declared, line))


def _params(node, skip_self: bool) -> list[str]:
    params = [p.name.value for p in list(node.params.posonly_params) + list(node.params.params)]
    return params[1:] if skip_self and params else params


def _inputs(it: Interpreter, src, params: list[str], specs, overrides: dict, node) -> list[Tensor]:
    line = src.line(node)
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise UserError(line, f"--input {unknown[0]}: the entry has no parameter of that name "
                              f"(parameters: {', '.join(params) or 'none'})")
    if specs is not None and len(specs) != len(params):
        raise UserError(line, f"example_inputs() returns {len(specs)} tensors but the entry takes {len(params)} "
                              f"({', '.join(params)})")
    tensors = []
    for i, name in enumerate(params):
        spec = specs[i] if specs is not None else None
        if name in overrides:
            shape, dtype, bounds, at = override_shape(overrides[name]), spec.dtype if spec else "f32", \
                spec.bounds if spec else None, line
        elif spec is not None:
            shape, dtype, bounds, at = spec.shape, spec.dtype, spec.bounds, spec.line
        else:
            raise UserError(line, f"no example_inputs() in the file and no --input for parameter {name!r}; "
                                  f"give its shape, e.g. --input {name}=8x16")
        dims = tuple(it.dims.dim(s) for s in shape)
        ir_name = it.builder.add_input(name, dims, dtype, tuple(Replicate() for _ in it.dims.mesh.names), at,
                                       bounds)
        tensors.append(Tensor(ir_name, tuple(to_sym(s) for s in shape), dtype, origin="input"))
    return tensors


def _outputs(it: Interpreter, result, node) -> list:
    line = it.line(node)
    found: list[Tensor] = []

    def collect(value) -> None:
        if isinstance(value, Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif value is None:
            return
        else:
            raise UnsupportedError(line, "return value", f"returning {type(value).__name__} is not modelled")

    collect(result)
    if not found:
        raise UnsupportedError(line, "return value", "the entry returns no tensor")
    outputs = []
    for tensor in found:
        name = it.use(tensor, line)
        placements = tuple(Replicate() for _ in it.dims.mesh.names)
        if tensor.dt is not None:
            by_dim = dict(zip(tensor.dt_mesh.dims, tensor.dt))
            placements = tuple(by_dim.get(dim, Replicate()) for dim in it.dims.mesh.names)
        outputs.append((name, placements, it.return_line))
    return outputs
