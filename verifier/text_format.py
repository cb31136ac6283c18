"""The readable text form of the IR (``.vir``): printer and parser that round-trip.

    # Megatron tensor-parallel MLP
    mesh tp=2
    dim S=4, H=8
    input x: f32[S, H] {tp: R}
    input w1: f32[H, 4*H] {tp: S(1)}
    input ids: i64[S] {tp: R} range(0, 100)
    h = matmul(x, w1) at 12
    y = all_reduce(h, mesh_dim=tp, op=sum) at 14
    output y {tp: R}

One statement per line; ``at N`` gives the source line of an op.  Placements name mesh
dims; a mesh dim left out is ``R``.  Parse errors are ``ParseError``s that print as
``file:line:col: expected ...``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .ir import (Dim, Function, Gradient, Mesh, Op, Output, Program, Span, TensorSpec, check_dim_syntax, dim_symbols,
                 split_requirement)
from .placements import Placement, R, parse_placement


class ParseError(ValueError):
    def __init__(self, file: str | None, line: int, col: int, message: str):
        self.file, self.line, self.col, self.message = file, line, col, message
        super().__init__(f"{file or '<ir>'}:{line}:{col}: {message}")


_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>"[^"\n]*")
  | (?P<number>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9.]*)
  | (?P<punct>==|[\[\]{}(),:=*/+\-%@])
""", re.VERBOSE)


@dataclass
class _Token:
    kind: str
    text: str
    col: int


class _Line:
    """Tokens of one line with a cursor and error reporting in the user's coordinates."""

    def __init__(self, text: str, lineno: int, file: str | None):
        self.lineno, self.file, self.tokens, self.pos = lineno, file, [], 0
        self.end_col = len(text) + 1
        index = 0
        while index < len(text):
            match = _TOKEN_RE.match(text, index)
            if not match:
                raise ParseError(file, lineno, index + 1, f"expected a token, got {text[index]!r}")
            if match.lastgroup != "ws":
                self.tokens.append(_Token(match.lastgroup, match.group(), index + 1))
            index = match.end()

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def error(self, expected: str) -> ParseError:
        token = self.peek()
        col = token.col if token else self.end_col
        got = repr(token.text) if token else "end of line"
        return ParseError(self.file, self.lineno, col, f"expected {expected}, got {got}")

    def take(self, text: str | None = None, kind: str | None = None, expected: str | None = None) -> _Token:
        token = self.peek()
        if token is None or (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            raise self.error(expected or (repr(text) if text else kind) or "a token")
        self.pos += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token is not None and token.text == text:
            self.pos += 1
            return True
        return False

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    def expect_end(self) -> None:
        if not self.at_end():
            raise self.error("end of line")


# --- parsing ------------------------------------------------------------------------------

def _parse_dim_expr(line: _Line, stops: tuple[str, ...]) -> Dim:
    start = line.peek()
    if start is None or start.text in stops:
        raise line.error("a dim (int, name or expression)")
    parts, depth = [], 0
    while True:
        token = line.peek()
        if token is None or (depth == 0 and token.text in stops):
            break
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth -= 1
        parts.append(token.text)
        line.pos += 1
    text = " ".join(parts)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        check_dim_syntax(text)
    except ValueError:
        raise ParseError(line.file, line.lineno, start.col, f"expected a dim expression, got {text!r}") from None
    return text.replace(" ", "")


def _parse_dim_list(line: _Line) -> list[Dim]:
    """``[S, H/4, -1]``: shapes and list attributes."""
    line.take("[", expected="'['")
    items: list[Dim] = []
    while not line.accept("]"):
        items.append(_parse_dim_expr(line, (",", "]")))
        if not line.accept(","):
            line.take("]", expected="',' or ']'")
            break
    return items


def _parse_value(line: _Line) -> Any:
    token = line.peek()
    if token is None:
        raise line.error("a value")
    if token.text == "[":
        return _parse_dim_list(line)
    if token.kind == "string":
        line.pos += 1
        return token.text[1:-1]
    if token.kind == "name" and token.text in ("true", "false", "none"):
        line.pos += 1
        return {"true": True, "false": False, "none": None}[token.text]
    if token.kind == "number" and re.search(r"[.eE]", token.text):
        line.pos += 1
        return float(token.text)
    return _parse_dim_expr(line, (",", ")", "]"))


def _parse_placements(line: _Line, mesh: Mesh | None) -> tuple[Placement, ...]:
    if mesh is None:
        raise line.error("a 'mesh' line before inputs and outputs")
    found: dict[str, Placement] = {}
    if line.accept("{"):
        while not line.accept("}"):
            name_token = line.take(kind="name", expected="a mesh dim name")
            if name_token.text not in mesh.names:
                raise ParseError(line.file, line.lineno, name_token.col,
                                 f"expected a mesh dim ({', '.join(mesh.names)}), got {name_token.text!r}")
            line.take(":", expected="':'")
            start = line.peek()
            text = ""
            while line.peek() is not None and line.peek().text not in (",", "}"):
                text += line.peek().text
                line.pos += 1
            try:
                found[name_token.text] = parse_placement(text)
            except ValueError:
                raise ParseError(line.file, line.lineno, start.col if start else line.end_col,
                                 f"expected a placement S(d), R, P(sum|avg|max|min) or V, got {text!r}") from None
            if not line.accept(","):
                line.take("}", expected="',' or '}'")
                break
    return tuple(found.get(name, R) for name in mesh.names)


def _whole_number(line: _Line, expected: str) -> int:
    """The next token as a non-negative int; ``1.5`` or ``1e3`` is a ParseError, not a ValueError."""
    token = line.take(kind="number", expected=expected)
    if not token.text.isdigit():
        raise ParseError(line.file, line.lineno, token.col, f"expected {expected}, got {token.text!r}")
    return int(token.text)


def _parse_span(line: _Line, file: str | None) -> Span:
    if line.accept("at"):
        return Span(_whole_number(line, "a source line number"), file)
    return Span(None, file)


def parse_program(text: str, file: str | None = None) -> Program:
    """Parse ``.vir`` text; raise ``ParseError`` naming line and column on bad input."""
    mesh: Mesh | None = None
    source: str | None = None
    dims: dict[str, int | None] = {}
    requires: list[str] = []
    inputs: list[TensorSpec] = []
    ops: list[Op] = []
    outputs: list[Output] = []
    gradients: list[Gradient] = []
    backward_ops: list[Op] = []
    functions: dict[str, Function] = {}
    target = ops  # where the next op goes: forward, backward section, or a def body
    function: tuple[str, tuple[str, ...], list[Op], int] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0]
        if not body.strip():
            continue
        if body.split()[0] == "require" and function is None:  # free text: comparisons are not IR tokens
            requirement = body.strip()[len("require"):].strip()
            _check_requirement(requirement, dims, file, lineno, raw.index("require") + len("require") + 2)
            requires.append(requirement)
            continue
        line = _Line(body, lineno, file)
        head = line.peek()
        if function is not None:
            if head.text == "return":
                line.pos += 1
                returns = [line.take(kind="name", expected="a value name").text]
                while line.accept(","):
                    returns.append(line.take(kind="name", expected="a value name").text)
                line.expect_end()
                name, params, body_ops, start = function
                functions[name] = Function(name, params, tuple(body_ops), tuple(returns), Span(start, file))
                function = None
            else:
                function[2].append(_parse_op(line, file))
            continue
        if head.text == "def":
            line.pos += 1
            name = line.take(kind="name", expected="a function name").text
            line.take("(", expected="'('")
            params: list[str] = []
            while not line.accept(")"):
                params.append(line.take(kind="name", expected="a parameter name").text)
                if not line.accept(","):
                    line.take(")", expected="',' or ')'")
                    break
            line.take(":", expected="':'")
            line.expect_end()
            function = (name, tuple(params), [], lineno)
        elif head.text == "backward" and len(line.tokens) == 1:
            target = backward_ops
        elif head.text == "grad" and len(line.tokens) > 1 and line.tokens[1].kind == "name":
            line.pos += 1
            name = line.take(kind="name", expected="an input name").text
            value = line.take(kind="name", expected="a value name").text if line.accept("=") else f"grad_{name}"
            placements = _parse_placements(line, mesh) if line.peek() is not None and line.peek().text == "{" else ()
            span = _parse_span(line, file)
            line.expect_end()
            gradients.append(Gradient(name, value, placements, span))
        elif head.text == "mesh":
            line.pos += 1
            pairs = []
            while not line.at_end():
                name = line.take(kind="name", expected="a mesh dim name").text
                line.take("=", expected="'='")
                size_token = line.take(kind="number", expected="a mesh dim size")
                if not size_token.text.isdigit() or int(size_token.text) < 1:
                    raise ParseError(file, lineno, size_token.col, f"expected a positive mesh size, got {size_token.text!r}")
                pairs.append((name, int(size_token.text)))
                line.accept(",")
            if not pairs:
                raise line.error("mesh dims like tp=2")
            mesh = Mesh(tuple(pairs))
        elif head.text == "source":
            line.pos += 1
            source = line.take(kind="string", expected="a quoted file name").text[1:-1]
            line.expect_end()
        elif head.text == "dim":
            line.pos += 1
            while not line.at_end():
                name = line.take(kind="name", expected="a dim symbol").text
                dims[name] = _whole_number(line, "a dim size") if line.accept("=") else None
                line.accept(",")
        elif head.text in ("input", "param"):
            line.pos += 1
            name = line.take(kind="name", expected="an input name").text
            line.take(":", expected="':'")
            dtype = line.take(kind="name", expected="a dtype like f32").text
            shape = _parse_dim_list(line)
            placements = _parse_placements(line, mesh)
            bounds = None
            if line.accept("range"):
                line.take("(", expected="'('")
                low = _parse_dim_expr(line, (",",))
                line.take(",", expected="','")
                high = _parse_dim_expr(line, (")",))
                line.take(")", expected="')'")
                bounds = (low, high)
            span = _parse_span(line, file)
            line.expect_end()
            inputs.append(TensorSpec(name, tuple(shape), dtype, placements, span, bounds))
        elif head.text == "output":
            line.pos += 1
            name = line.take(kind="name", expected="an output value name").text
            placements = _parse_placements(line, mesh)
            span = _parse_span(line, file)
            line.expect_end()
            outputs.append(Output(name, placements, span))
        else:
            target.append(_parse_op(line, file))
    if function is not None:
        raise ParseError(file, function[3], 1, f"expected 'return ...' to end def {function[0]}")
    if mesh is None:
        raise ParseError(file, 1, 1, "expected a 'mesh' line (e.g. 'mesh tp=2')")
    return Program(mesh, tuple(inputs), tuple(ops), tuple(outputs), dims, tuple(requires), source,
                   tuple(gradients), tuple(backward_ops), functions)


def _check_requirement(text: str, dims: dict, file: str | None, lineno: int, col: int) -> None:
    parts = split_requirement(text)
    if parts is None:
        raise ParseError(file, lineno, col, f"expected a requirement like 'H % 8 == 0', got {text!r}")
    for side in (parts[0], parts[2]):
        try:
            check_dim_syntax(side.strip())
        except ValueError:
            raise ParseError(file, lineno, col, f"expected a dim expression, got {side.strip()!r}") from None
        unknown = dim_symbols(side.strip()) - set(dims)
        if unknown:
            raise ParseError(file, lineno, col, f"expected declared dims, got {sorted(unknown)[0]!r} "
                                                f"(declare it with 'dim' first)")


def _parse_op(line: _Line, file: str | None) -> Op:
    first = line.take(kind="name", expected="a statement (mesh, dim, input, output) or 'name = op(...)'")
    results: list[str] = []
    if line.peek() is not None and line.peek().text == "(":
        kind = first.text  # an op without results: send(...), wait(...)
    else:
        results.append(first.text)
        while line.accept(","):
            results.append(line.take(kind="name", expected="a result name").text)
        line.take("=", expected="'='")
        kind = line.take(kind="name", expected="an op name").text
    line.take("(", expected="'('")
    args: list[str] = []
    attrs: dict[str, Any] = {}
    while not line.accept(")"):
        token = line.take(kind="name", expected="an argument name or key=value")
        if line.accept("="):
            attrs[token.text] = _parse_value(line)
            if token.text in _INTEGER_ATTRS and isinstance(attrs[token.text], (str, float, bool)):
                raise ParseError(file, line.lineno, token.col,
                                 f"{token.text}= takes an integer (or a size expression), got {attrs[token.text]!r}")
        elif attrs:
            raise ParseError(file, line.lineno, token.col, "expected key=value after the first attribute")
        else:
            args.append(token.text)
        if not line.accept(","):
            line.take(")", expected="',' or ')'")
            break
    span = _parse_span(line, file)
    line.expect_end()
    return Op(tuple(results), kind, tuple(args), attrs, span)


# attributes the op rules read as integers (ranks and peers may be rank expressions: not listed)
_INTEGER_ATTRS = frozenset({"dim", "split_dim", "concat_dim", "chunks"})


# --- printing -----------------------------------------------------------------------------

def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(item) for item in value) + "]"
    if isinstance(value, str):
        return value if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9.]*|[A-Za-z_0-9*/+\-%()]+", value) else f'"{value}"'
    return repr(value)


def _format_placements(mesh: Mesh, placements: tuple[Placement, ...]) -> str:
    values = placements or tuple(R for _ in mesh.names)
    return "{" + ", ".join(f"{name}: {placement}" for name, placement in zip(mesh.names, values)) + "}"


def _format_span(span: Span) -> str:
    return f" at {span.line}" if span.line is not None else ""


def print_program(program: Program) -> str:
    lines = []
    if program.source:
        lines.append(f'source "{program.source}"')
    lines.append("mesh " + ", ".join(f"{name}={size}" for name, size in program.mesh.dims))
    if program.dims:
        lines.append("dim " + ", ".join(name if value is None else f"{name}={value}"
                                        for name, value in program.dims.items()))
    lines.extend(f"require {requirement}" for requirement in program.requires)
    for spec in program.inputs:
        shape = ", ".join(str(dim) for dim in spec.shape)
        bounds = f" range({spec.bounds[0]}, {spec.bounds[1]})" if spec.bounds else ""
        lines.append(f"input {spec.name}: {spec.dtype}[{shape}] "
                     f"{_format_placements(program.mesh, spec.placements)}{bounds}{_format_span(spec.span)}")
    for function in program.functions.values():
        lines.append(f"def {function.name}({', '.join(function.params)}):")
        lines.extend("    " + _format_op(op) for op in function.ops)
        lines.append(f"    return {', '.join(function.returns)}")
    lines.extend(_format_op(op) for op in program.ops)
    for out in program.outputs:
        lines.append(f"output {out.name} {_format_placements(program.mesh, out.placements)}{_format_span(out.span)}")
    if program.backward_ops:
        lines.append("backward")
        lines.extend(_format_op(op) for op in program.backward_ops)
    for gradient in program.gradients:
        value = "" if gradient.value == f"grad_{gradient.input}" else f" = {gradient.value}"
        placements = f" {_format_placements(program.mesh, gradient.placements)}" if gradient.placements else ""
        lines.append(f"grad {gradient.input}{value}{placements}{_format_span(gradient.span)}")
    return "\n".join(lines) + "\n"


def _format_op(op: Op) -> str:
    arguments = list(op.args) + [f"{key}={_format_value(value)}" for key, value in op.attrs.items()]
    head = f"{', '.join(op.results)} = " if op.results else ""
    return f"{head}{op.kind}({', '.join(arguments)}){_format_span(op.span)}"
