"""The JSON form of the IR: pydantic models mirroring ``verifier.ir``, conversions, the schema.

Why a second form next to ``.vir``: endpoints with structured output (``response_format``
``json_schema``) can be held to a schema, so a model cannot answer with text we cannot read;
and pydantic's errors name the exact place (``ops.3.args``) that is wrong, which is what the
feedback round sends back.  The JSON form is lossless: text -> Program -> JSON -> Program
gives the same program.

Placements are strings in the text form's spelling (``"S(1)"``, ``"R"``, ``"P(sum)"``,
``"V"``), keyed by mesh dim; a mesh dim left out is ``R``.  Dims are ints or expressions
over declared symbols (``"4*H"``).  The published schema is ``prompts/ir.schema.json``;
regenerate it with ``python -m agent.schema > prompts/ir.schema.json`` (a test keeps it
in step).
"""
from __future__ import annotations

import json
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from verifier.ir import Function, Gradient, Mesh, Op, Output, Program, Span, TensorSpec, check_dim_syntax
from verifier.placements import R, parse_placement

SCHEMA_ID = "https://verify-agent.dev/schemas/ir.schema.json"

NAME_PATTERN = r"^[A-Za-z_][A-Za-z_0-9.]*$"
DimValue = Union[int, str]
AttrItem = Union[bool, int, float, str]
AttrValue = Union[bool, int, float, str, None, list[AttrItem]]


def _check_dim(value: DimValue) -> DimValue:
    if isinstance(value, str):
        check_dim_syntax(value)  # ValueError -> pydantic reports it with its location
        return value.replace(" ", "")
    return value


def _check_placements(value: dict[str, str]) -> dict[str, str]:
    for text in value.values():
        parse_placement(text)
    return value


class InputJSON(BaseModel):
    """One input: its *global* shape and how each mesh dim distributes it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="Value name, e.g. the source's parameter name.")
    dtype: str = Field("f32", description="f32, f16, bf16, f64, i64, i32 or bool.")
    shape: list[DimValue] = Field(description="Global shape: ints or dim expressions such as 'H' or '4*H'.")
    placements: dict[str, str] = Field(default_factory=dict,
                                       description="Mesh dim -> 'S(d)', 'R', 'P(sum|avg|max|min)' or 'V'; "
                                                   "mesh dims left out are 'R'.")
    bounds: Optional[list[DimValue]] = Field(None, min_length=2, max_length=2,
                                             description="Integer inputs (token ids): values in [low, high).")
    line: Optional[int] = Field(None, description="Source line that introduces the input.")

    @field_validator("shape")
    @classmethod
    def _shape(cls, value: list[DimValue]) -> list[DimValue]:
        return [_check_dim(d) for d in value]

    @field_validator("placements")
    @classmethod
    def _placements(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_placements(value)


class OpJSON(BaseModel):
    """One SSA op: ``results = op(args, attrs)`` at a source line."""

    model_config = ConfigDict(extra="forbid")

    results: list[str] = Field(default_factory=list, description="Names it defines (none for send/wait).")
    op: str = Field(pattern=r"^[A-Za-z_][A-Za-z_0-9]*$", description="Op name from the catalogue.")
    args: list[str] = Field(default_factory=list, description="Tensor arguments: names defined earlier.")
    attrs: dict[str, AttrValue] = Field(default_factory=dict,
                                        description="Non-tensor attributes, e.g. mesh_dim, op, dim, shape; "
                                                    "send/recv/isend/irecv: peer, tag (default 0).")
    line: Optional[int] = Field(None, description="Source line the op comes from.")

    @field_validator("results", "args")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c in "_." for c in name):
                raise ValueError(f"expected a value name, got {name!r}")
        return value


class OutputJSON(BaseModel):
    """A result of the program with the placement the user expects (usually all 'R')."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    placements: dict[str, str] = Field(default_factory=dict)
    line: Optional[int] = None

    @field_validator("placements")
    @classmethod
    def _placements(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_placements(value)


class FunctionJSON(BaseModel):
    """A ``def``: the body of a custom autograd function (its forward or its backward)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z_0-9]*$")
    params: list[str] = Field(default_factory=list)
    ops: list[OpJSON] = Field(default_factory=list)
    returns: list[str] = Field(description="Returned value names ('none' for no gradient).")
    line: Optional[int] = Field(None, description="Line of the def in the IR text (not a source line).")


class GradientJSON(BaseModel):
    """Check the gradient of an input: its final value, placed as given."""

    model_config = ConfigDict(extra="forbid")

    input: str = Field(pattern=NAME_PATTERN)
    value: Optional[str] = Field(None, description="The value holding it; default grad_<input>.")
    placements: Optional[dict[str, str]] = Field(None, description="Expected placement; default: like the input.")
    line: Optional[int] = None

    @field_validator("placements")
    @classmethod
    def _placements(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else _check_placements(value)


class ProgramJSON(BaseModel):
    """An SPMD program over a named device mesh (see docs/ir.md)."""

    model_config = ConfigDict(extra="forbid", title="verify-agent IR program")

    source: Optional[str] = Field(None, description="The file the ops' lines refer to.")
    mesh: dict[str, int] = Field(description="Mesh dims, major to minor, e.g. {\"dp\": 2, \"tp\": 4}.")
    dims: dict[str, Optional[int]] = Field(default_factory=dict,
                                           description="Symbolic dims: a size, or null for a free dim.")
    requires: list[str] = Field(default_factory=list, description="Constraints on free dims, e.g. 'F % 8 == 0'.")
    inputs: list[InputJSON]
    functions: list[FunctionJSON] = Field(default_factory=list, description="Custom autograd function bodies.")
    ops: list[OpJSON]
    outputs: list[OutputJSON]
    backward: list[OpJSON] = Field(default_factory=list,
                                   description="Ops run after the generated backward (gradient synchronisation).")
    gradients: list[GradientJSON] = Field(default_factory=list, description="Gradients to check.")

    @field_validator("mesh")
    @classmethod
    def _mesh(cls, value: dict[str, int]) -> dict[str, int]:
        if not value:
            raise ValueError("expected at least one mesh dim, e.g. {\"tp\": 2}")
        for name, size in value.items():
            if size < 1:
                raise ValueError(f"mesh dim {name} needs a positive size, got {size}")
        return value

    @model_validator(mode="after")
    def _placement_dims(self) -> "ProgramJSON":
        named = [("input", i.name, i.placements) for i in self.inputs] + \
            [("output", o.name, o.placements) for o in self.outputs] + \
            [("gradient", g.input, g.placements or {}) for g in self.gradients]
        for kind, name, placements in named:
            unknown = [d for d in placements if d not in self.mesh]
            if unknown:
                raise ValueError(f"{kind} {name}: placement for {unknown[0]!r}, but the mesh has "
                                 f"{', '.join(self.mesh)}")
        return self


# --- conversions ---------------------------------------------------------------------------

def _placements_to_json(mesh: Mesh, placements: tuple) -> dict[str, str]:
    values = placements or tuple(R for _ in mesh.names)
    return {name: str(p) for name, p in zip(mesh.names, values)}


def _placements_from_json(mesh: Mesh, placements: dict[str, str]) -> tuple:
    return tuple(parse_placement(placements[name]) if name in placements else R for name in mesh.names)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _op_to_json(op: Op) -> dict[str, Any]:
    return {"results": list(op.results), "op": op.kind, "args": list(op.args),
            "attrs": {k: _plain(v) for k, v in op.attrs.items()},
            **({"line": op.span.line} if op.span.line is not None else {})}


def _op_from_json(op: OpJSON, file: str | None) -> Op:
    return Op(tuple(op.results), op.op, tuple(op.args), dict(op.attrs), Span(op.line, file))


def program_to_json(program: Program) -> dict[str, Any]:
    """The JSON-able dict of ``program`` (validates against ``ir_schema()``)."""
    mesh = program.mesh
    extra: dict[str, Any] = {}
    if program.functions:
        extra["functions"] = [{"name": f.name, "params": list(f.params), "ops": [_op_to_json(op) for op in f.ops],
                               "returns": list(f.returns), **({"line": f.span.line} if f.span.line is not None else {})}
                              for f in program.functions.values()]
    if program.backward_ops:
        extra["backward"] = [_op_to_json(op) for op in program.backward_ops]
    if program.gradients:
        extra["gradients"] = [{"input": g.input, "value": g.value,
                               **({"placements": _placements_to_json(mesh, g.placements)} if g.placements else {}),
                               **({"line": g.span.line} if g.span.line is not None else {})}
                              for g in program.gradients]
    return {
        **({"source": program.source} if program.source else {}),
        "mesh": {name: size for name, size in mesh.dims},
        "dims": dict(program.dims),
        "requires": list(program.requires),
        "inputs": [{"name": s.name, "dtype": s.dtype, "shape": list(s.shape),
                    "placements": _placements_to_json(mesh, s.placements),
                    **({"bounds": list(s.bounds)} if s.bounds else {}),
                    **({"line": s.span.line} if s.span.line is not None else {})} for s in program.inputs],
        "ops": [_op_to_json(op) for op in program.ops],
        "outputs": [{"name": o.name, "placements": _placements_to_json(mesh, o.placements),
                     **({"line": o.span.line} if o.span.line is not None else {})} for o in program.outputs],
        **extra,
    }


def to_program(model: ProgramJSON, file: str | None = None) -> Program:
    mesh = Mesh(tuple(model.mesh.items()))
    inputs = tuple(TensorSpec(i.name, tuple(i.shape), i.dtype, _placements_from_json(mesh, i.placements),
                              Span(i.line, file), tuple(_check_dim(b) for b in i.bounds) if i.bounds else None)
                   for i in model.inputs)
    ops = tuple(_op_from_json(o, file) for o in model.ops)
    outputs = tuple(Output(o.name, _placements_from_json(mesh, o.placements), Span(o.line, file))
                    for o in model.outputs)
    functions = {f.name: Function(f.name, tuple(f.params), tuple(_op_from_json(o, file) for o in f.ops),
                                  tuple(f.returns), Span(f.line, file)) for f in model.functions}
    gradients = tuple(Gradient(g.input, g.value or f"grad_{g.input}",
                               _placements_from_json(mesh, g.placements) if g.placements is not None else (),
                               Span(g.line, file)) for g in model.gradients)
    return Program(mesh, inputs, ops, outputs, dict(model.dims), tuple(model.requires), model.source, gradients,
                   tuple(_op_from_json(o, file) for o in model.backward), functions)


def program_from_json(data: str | dict[str, Any], file: str | None = None) -> Program:
    """Read the JSON form (text or parsed); raise ``ValueError`` (pydantic's, with locations)."""
    if isinstance(data, str):
        model = ProgramJSON.model_validate_json(data)
    else:
        model = ProgramJSON.model_validate(data)
    return to_program(model, file)


def ir_schema() -> dict[str, Any]:
    """The published JSON schema of the IR (what structured output is held to)."""
    schema = ProgramJSON.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def schema_text() -> str:
    return json.dumps(ir_schema(), indent=2, sort_keys=True) + "\n"
