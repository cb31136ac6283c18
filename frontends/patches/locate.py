"""From an IR value back to the Python code that computes it.

The frontend names IR values after the variables they are assigned to (``h``, ``h_1`` for a
rebinding of ``h``) and gives every op the line it came from.  A value is found either as a
variable (the whole right-hand side of an assignment on its line) or as a sub-expression of
that line: the k-th op of its kind on the line is the k-th expression of that kind in
evaluation order.  Anything ambiguous is refused rather than guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from verifier.ir import Program

from .editor import CannotPatch, SourceEditor, call_name

# IR op kind -> how its expression looks (names are matched on the last dotted component)
_CALL_NAMES = {
    "gelu": ("gelu",), "silu": ("silu",), "relu": ("relu",), "tanh": ("tanh",), "sigmoid": ("sigmoid",),
    "exp": ("exp",), "softmax": ("softmax",), "log_softmax": ("log_softmax",), "layer_norm": ("layer_norm",),
    "rms_norm": ("rms_norm",), "matmul": ("matmul", "mm", "bmm"), "linear": ("linear",),
    "all_reduce": ("all_reduce", "reduce_from_tensor_model_parallel_region"),
    "all_gather": ("all_gather", "all_gather_into_tensor", "gather_from_tensor_model_parallel_region",
                   "gather_from_sequence_parallel_region"),
    "reduce_scatter": ("reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_to_sequence_parallel_region"),
    "cat": ("cat",), "reshape": ("reshape", "view"), "sum": ("sum",), "mean": ("mean",),
}
_BINARY = {"matmul": cst.MatrixMultiply, "add": cst.Add, "sub": cst.Subtract, "mul": cst.Multiply,
           "div": cst.Divide}


def base_name(value: str) -> str:
    """``h_1`` -> ``h``: the variable an IR value was named after."""
    return re.sub(r"_\d+$", "", value)


@dataclass(frozen=True)
class Located:
    statement: cst.SimpleStatementLine
    variable: str | None  # the value is this variable after the statement
    expression: cst.BaseExpression | None  # ... or this sub-expression of the statement


def producer(program: Program, value: str) -> int | None:
    return next((i for i, op in enumerate(program.ops) if value in op.results), None)


def _postorder(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []

    class Walk(cst.CSTVisitor):
        def on_leave(self, original_node: cst.CSTNode) -> None:
            out.append(original_node)

    node.visit(Walk())
    return out


def _looks_like(node: cst.CSTNode, kind: str) -> bool:
    if kind in _BINARY and isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _BINARY[kind]):
        return True
    if isinstance(node, cst.Call):
        return call_name(node) in _CALL_NAMES.get(kind, ())
    if kind == "local_chunk" and m.matches(node, m.Subscript(value=m.Call(func=m.Attribute(attr=m.Name("chunk"))))):
        return True
    return False


def _assigned_name(statement: cst.SimpleStatementLine) -> str | None:
    small = statement.body[0] if len(statement.body) == 1 else None
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return small.targets[0].target.value
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
        return small.target.value
    return None


def locate(editor: SourceEditor, program: Program, value: str, synthetic: frozenset[str] = frozenset()) -> Located:
    """Where ``value`` is computed; ops producing ``synthetic`` values (added by earlier changes of
    the same fix, not yet in the file) do not count."""
    index = producer(program, value)
    if index is None:
        spec = next((s for s in program.inputs if s.name == value), None)
        if spec is None:
            raise CannotPatch(f"value {value} is not defined")
        raise CannotPatch(f"{value} is an input of the entry; the change belongs to the caller")
    op = program.ops[index]
    line = op.span.line
    statement = editor.statement_at(line)
    same_line = [i for i, other in enumerate(program.ops)
                 if other.span.line == line and other.results and not set(other.results) & synthetic]
    target = _assigned_name(statement)
    if target is not None and base_name(value) == target and same_line and same_line[-1] == index:
        return Located(statement, target, None)
    small = statement.body[0] if len(statement.body) == 1 else None
    expression_root = (small.value if isinstance(small, (cst.Assign, cst.Return, cst.Expr, cst.AnnAssign)) else None)
    if expression_root is None:
        raise CannotPatch(f"cannot find the expression of {value} on line {line}")
    if index not in same_line:
        raise CannotPatch(f"{value} is computed by code this fix adds")
    peers = [i for i in same_line if program.ops[i].kind == op.kind]
    nodes = [n for n in _postorder(expression_root) if _looks_like(n, op.kind)]
    if len(nodes) != len(peers):
        raise CannotPatch(f"{len(peers)} {op.kind} op(s) on line {line} but {len(nodes)} matching expression(s)")
    node = nodes[peers.index(index)]
    if node is expression_root and target is not None:
        return Located(statement, target, None)
    return Located(statement, None, node)


@dataclass(frozen=True)
class Named:
    """A value with a variable name, and where code that uses it right after it is computed goes."""

    name: str
    statement: cst.SimpleStatementLine
    hoisted: bool  # the name was introduced before ``statement`` (code goes before it)

    def emit(self, editor: SourceEditor, *code: str) -> None:
        if self.hoisted:
            editor.insert_before(self.statement, *code)
        else:
            editor.insert_after(self.statement, *code)


def hoist(editor: SourceEditor, located: Located, base: str) -> Named:
    """Give a sub-expression a name: ``name = <expr>`` before its statement, the name in its place."""
    if located.variable is not None:
        return Named(located.variable, located.statement, False)
    name = editor.fresh_name(base)
    editor.insert_before(located.statement, f"{name} = {editor.code(located.expression)}")
    editor.replace(located.expression, cst.Name(name))
    return Named(name, located.statement, True)


def value_rank(program: Program, value: str) -> int:
    """Number of dims of an IR value (from the verifier's shape inference)."""
    from verifier.synthesis.symptoms import NotAnalysable, analyse

    try:
        return len(analyse(program).shapes[value])
    except (NotAnalysable, KeyError):
        raise CannotPatch(f"the shape of {value} is unknown") from None
