"""Mutation operators over Python source of distributed training code.

Each operator finds its sites with ``ast`` and rewrites only the characters of the site
(source positions), so a mutant differs from its original by one small, readable edit.
Mutants are values (``Mutant``); nothing here writes files.

Operators (name: what one mutant does at one site)
  drop_collective       a collective statement becomes ``pass``; a collective used as a
                        value (functional / Megatron mapping / autograd.Function.apply)
                        is replaced by its first argument
  duplicate_collective  a collective statement runs twice; a collective value is applied twice
  move_collective       a collective statement swaps places with its neighbour statement
  swap_send_recv        two adjacent point-to-point calls (or P2POp entries) swap order
  reduce_op             SUM <-> AVG <-> MAX (keyword ``op=`` added when absent; funcol strings)
  dim                   an integer ``dim=`` argument moved by one
  src_dst               ``src=`` / ``dst=`` / peer argument: ``0`` or ``(peer + 1) % world``
  tag                   ``tag=`` of a point-to-point call: ``+ 1``, or ``tag=1`` added
  chunk_index           ``[rank]`` -> ``[0]`` and ``[world - 1 - rank]``
  slice_bounds          a slice bound moved by one (``lo + 1``, ``hi - 1``, ``hi + 1``)
  remove_wait           ``work.wait()`` / ``wait_tensor(x)`` removed
  remove_clone          ``x.clone()`` -> ``x``
  swap_permute          two adjacent dims of a ``permute`` swapped
  drop_transpose        ``x.transpose(a, b)`` / ``x.t()`` -> ``x``
  drop_world_scaling    ``y / world`` -> ``y``; ``y /= world`` and ``y.div_(world)`` removed
  add_world_scaling     a reduced value divided by the world size once more
  partition_stride      ``stride=`` of a parallel layer (Megatron ``partition_stride``) 1 <-> 2
  strided_shard         ``chunk(world, dim=d)[rank]`` -> the strided slice ``[..., rank::world]``
                        and back (contiguous vs strided shard)
  fused_order           ``a, b = x.chunk(2, ...)`` -> ``b, a = ...`` (fused gate/up order)
  parallel_flag         a layout flag of a parallel layer or mapping flipped (``gather_output``,
                        ``input_is_parallel``, ``tensor_parallel_output_grad``, ...)
  plan_style            a DTensor plan entry ``ColwiseParallel()`` <-> ``RowwiseParallel()``
  swap_int_args         two adjacent integer arguments of a collective call swapped (an all-to-all's
                        scatter and gather dims)
  backward_identity     a custom autograd Function's ``backward`` returns its gradient unchanged
                        instead of the communicated one
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from typing import Callable, Iterator

C10D_COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "reduce", "scatter", "gather", "all_to_all",
    "all_to_all_single", "send", "recv", "isend", "irecv", "barrier", "batch_isend_irecv",
    "_all_gather_base", "_reduce_scatter_base", "broadcast_object_list",
})
P2P = frozenset({"send", "recv", "isend", "irecv"})
REDUCING = frozenset({"all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base"})
ROOTED = frozenset({"broadcast", "reduce", "scatter", "gather"})
FUNCOL_COLLECTIVES = frozenset({
    "all_reduce", "all_gather_tensor", "reduce_scatter_tensor", "all_to_all_single", "broadcast",
    "all_gather_tensor_autograd", "reduce_scatter_tensor_autograd", "all_to_all_single_autograd",
    "permute_tensor",
})
MEGATRON_MAPPINGS = frozenset({
    "copy_to_tensor_model_parallel_region", "reduce_from_tensor_model_parallel_region",
    "scatter_to_tensor_model_parallel_region", "gather_from_tensor_model_parallel_region",
    "scatter_to_sequence_parallel_region", "gather_from_sequence_parallel_region",
    "reduce_scatter_to_sequence_parallel_region", "all_to_all",
    "all_gather_last_dim_from_tensor_parallel_region", "reduce_scatter_last_dim_to_tensor_parallel_region",
})
FAIRSCALE_MAPPINGS = frozenset({
    "copy_to_model_parallel_region", "reduce_from_model_parallel_region", "scatter_to_model_parallel_region",
    "gather_from_model_parallel_region",
})
LIBRARY_AUTOGRAD_COLLECTIVES = frozenset({"SeqAllToAll4D", "SeqAllToAll5D", "_SeqAllToAll", "_AllToAll"})
REDUCE_OPS = ("SUM", "AVG", "MAX")
FUNCOL_OPS = ("sum", "avg", "max")


@dataclass(frozen=True)
class Edit:
    start: int  # character offsets into the source
    end: int
    text: str


@dataclass(frozen=True)
class Mutant:
    origin: str  # the original file, as given
    operator: str
    line: int  # 1-based line of the mutated site in the original
    description: str
    source: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def ident(self) -> str:
        return f"{self.origin}:{self.line}:{self.operator}:{self.digest[:8]}"


# ----------------------------------------------------------------------------------------
# Source positions
# ----------------------------------------------------------------------------------------

class _Text:
    """Character offsets of ``ast`` positions (whose columns count UTF-8 bytes)."""

    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col_byte: int) -> int:
        if lineno > len(self.lines):
            return len(self.source)
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:col_byte].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def indent(self, node: ast.stmt) -> str:
        line = self.lines[node.lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def alone_on_its_lines(self, node: ast.stmt) -> bool:
        start, end = self.span(node)
        before = self.source[self.starts[node.lineno - 1]:start]
        after_line = self.lines[node.end_lineno - 1]
        after = self.source[end:self.starts[node.end_lineno - 1] + len(after_line)]
        return not before.strip() and (not after.strip() or after.strip().startswith("#"))


def apply_edits(source: str, edits: list[Edit]) -> str:
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        source = source[:edit.start] + edit.text + source[edit.end:]
    return source


# ----------------------------------------------------------------------------------------
# What the file imports, and which calls are collectives
# ----------------------------------------------------------------------------------------

class _Context:
    def __init__(self, tree: ast.Module, text: _Text):
        self.tree = tree
        self.text = text
        self.aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                q = self.qualname(node.value) if isinstance(node.value, (ast.Attribute, ast.Name)) else ""
                if q.startswith("torch.distributed.") and q.rsplit(".", 1)[1] in C10D_COLLECTIVES:
                    self.aliases[node.targets[0].id] = q
        self.autograd_collectives = {
            cls.name for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
            and any(isinstance(n, ast.Call) and self.is_c10d(n) for n in ast.walk(cls))
        }
        self.world = self._world_expression()

    def qualname(self, func: ast.AST) -> str:
        parts = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return ""
        parts.append(self.aliases.get(func.id, func.id))
        return ".".join(reversed(parts))

    def c10d_name(self, call: ast.Call) -> str | None:
        q = self.qualname(call.func)
        if q.startswith("torch.distributed.") and "_functional_collectives" not in q:
            name = q.rsplit(".", 1)[1]
            if name in C10D_COLLECTIVES and q.count(".") == 2:
                return name
        return None

    def is_c10d(self, call: ast.Call) -> bool:
        return self.c10d_name(call) is not None

    def is_funcol(self, call: ast.Call) -> bool:
        q = self.qualname(call.func)
        return "_functional_collectives" in q and q.rsplit(".", 1)[1] in FUNCOL_COLLECTIVES

    def is_value_collective(self, call: ast.Call) -> bool:
        """A collective whose result is the communicated value (functional style)."""
        if self.is_funcol(call):
            return True
        q = self.qualname(call.func)
        last = q.rsplit(".", 1)[-1] if q else ""
        if last in MEGATRON_MAPPINGS and "megatron" in q:
            return True
        if last in FAIRSCALE_MAPPINGS and "fairscale" in q:
            return True
        if isinstance(call.func, ast.Attribute) and call.func.attr == "apply" \
                and self.qualname(call.func.value).rsplit(".", 1)[-1] in LIBRARY_AUTOGRAD_COLLECTIVES:
            return True
        if isinstance(call.func, ast.Attribute) and call.func.attr == "apply" \
                and isinstance(call.func.value, ast.Name) and call.func.value.id in self.autograd_collectives:
            return True
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("redistribute", "full_tensor"):
            return True
        return False

    def c10d_prefix(self) -> str | None:
        for alias, target in self.aliases.items():
            if target == "torch.distributed":
                return alias
        if self.aliases.get("torch") == "torch":
            return "torch.distributed"
        return None

    def _world_expression(self) -> str | None:
        prefix = self.c10d_prefix()
        return f"{prefix}.get_world_size()" if prefix else None


def _statements(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _const_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _const_int(node.operand)
        return None if inner is None else -inner
    return None


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _mentions_world(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and "world" in n.id.lower():
            return True
        if isinstance(n, ast.Attribute) and ("world" in n.attr.lower()):
            return True
    return False


def _collective_statement_call(ctx: _Context, stmt: ast.stmt) -> ast.Call | None:
    """The c10d call of a statement ``dist.x(...)`` or ``work = dist.x(..., async_op=True)``."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if isinstance(value, ast.Call) and ctx.is_c10d(value):
        return value
    return None


Site = tuple[str, int, str, list[Edit]]  # operator, line, description, edits
Operator = Callable[[_Context], Iterator[Site]]


# ----------------------------------------------------------------------------------------
# Operators
# ----------------------------------------------------------------------------------------

def drop_collective(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for block in _statements(ctx.tree):
        for stmt in block:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and ctx.is_c10d(stmt.value) \
                    and t.alone_on_its_lines(stmt):
                start, end = t.span(stmt)
                yield "drop_collective", stmt.lineno, f"{ctx.c10d_name(stmt.value)} removed", [Edit(start, end, "pass")]
    for call in ast.walk(ctx.tree):
        if isinstance(call, ast.Call) and ctx.is_value_collective(call):
            receiver = _receiver_or_first_arg(ctx, call)
            if receiver is not None:
                start, end = t.span(call)
                yield "drop_collective", call.lineno, f"{t.text(call.func)} removed", [Edit(start, end, receiver)]


def _receiver_or_first_arg(ctx: _Context, call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("redistribute", "full_tensor"):
        return f"({ctx.text.text(call.func.value)})"
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            return None
        if isinstance(arg, ast.Constant) or "group" in ctx.text.text(arg).lower():
            continue
        return f"({ctx.text.text(arg)})"
    return None


def duplicate_collective(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for block in _statements(ctx.tree):
        for stmt in block:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and ctx.is_c10d(stmt.value) \
                    and t.alone_on_its_lines(stmt):
                _, end = t.span(stmt)
                yield ("duplicate_collective", stmt.lineno, f"{ctx.c10d_name(stmt.value)} twice",
                       [Edit(end, end, "\n" + t.indent(stmt) + t.text(stmt))])
    for call in ast.walk(ctx.tree):
        if isinstance(call, ast.Call) and ctx.is_value_collective(call) and call.args \
                and not isinstance(call.args[0], ast.Starred) \
                and not (isinstance(call.func, ast.Attribute) and call.func.attr in ("redistribute", "full_tensor")):
            start, end = t.span(call.args[0])
            yield ("duplicate_collective", call.lineno, f"{t.text(call.func)} applied twice",
                   [Edit(start, end, t.text(call))])


_SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)


def _swap(ctx: _Context, a: ast.stmt, b: ast.stmt) -> list[Edit]:
    t = ctx.text
    (sa, ea), (sb, eb) = t.span(a), t.span(b)
    return [Edit(sa, ea, t.text(b)), Edit(sb, eb, t.text(a))]


def _is_p2p_stmt(ctx: _Context, stmt: ast.stmt) -> bool:
    call = _collective_statement_call(ctx, stmt)
    return call is not None and ctx.c10d_name(call) in P2P


def move_collective(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for block in _statements(ctx.tree):
        for a, b in zip(block, block[1:]):
            if not (isinstance(a, _SIMPLE) and isinstance(b, _SIMPLE)):
                continue
            if not (t.alone_on_its_lines(a) and t.alone_on_its_lines(b)):
                continue
            ca, cb = _collective_statement_call(ctx, a), _collective_statement_call(ctx, b)
            if ca is None and cb is None:
                continue
            if _is_p2p_stmt(ctx, a) and _is_p2p_stmt(ctx, b):
                continue  # swap_send_recv
            moved = ca if ca is not None else cb
            line = a.lineno if ca is not None else b.lineno
            where = "later" if ca is not None else "earlier"
            yield ("move_collective", line, f"{ctx.c10d_name(moved)} moved one statement {where}", _swap(ctx, a, b))


def swap_send_recv(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for block in _statements(ctx.tree):
        for a, b in zip(block, block[1:]):
            if _is_p2p_stmt(ctx, a) and _is_p2p_stmt(ctx, b) and t.alone_on_its_lines(a) and t.alone_on_its_lines(b):
                yield "swap_send_recv", a.lineno, "two point-to-point calls swapped", _swap(ctx, a, b)
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.List):
            elts = node.elts
            for a, b in zip(elts, elts[1:]):
                if all(isinstance(e, ast.Call) and ctx.qualname(e.func).endswith("P2POp") for e in (a, b)):
                    (sa, ea), (sb, eb) = t.span(a), t.span(b)
                    yield ("swap_send_recv", a.lineno, "two P2POp entries swapped",
                           [Edit(sa, ea, t.text(b)), Edit(sb, eb, t.text(a))])


def reduce_op(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    prefix = ctx.c10d_prefix()
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call):
            continue
        name = ctx.c10d_name(call)
        if name in REDUCING:
            kw = _keyword(call, "op")
            if kw is not None and isinstance(kw.value, ast.Attribute) and kw.value.attr in REDUCE_OPS + ("MIN", "PRODUCT"):
                start, end = t.span(kw.value)
                base = t.text(kw.value.value)
                for op in REDUCE_OPS:
                    if op != kw.value.attr:
                        yield "reduce_op", call.lineno, f"{name} op {kw.value.attr} -> {op}", [Edit(start, end, f"{base}.{op}")]
            elif kw is None and prefix and not any(isinstance(a, ast.Starred) for a in call.args) \
                    and len(call.args) < (3 if name in ("reduce_scatter", "reduce_scatter_tensor", "reduce", "_reduce_scatter_base") else 2):
                _, end = t.span(call)
                for op in REDUCE_OPS[1:]:
                    yield ("reduce_op", call.lineno, f"{name} op SUM -> {op}",
                           [Edit(end - 1, end - 1, f", op={prefix}.ReduceOp.{op}")])
        elif ctx.is_funcol(call):
            for arg in list(call.args) + [k.value for k in call.keywords]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.lower() in FUNCOL_OPS:
                    start, end = t.span(arg)
                    for op in FUNCOL_OPS:
                        if op != arg.value.lower():
                            yield "reduce_op", call.lineno, f"funcol op {arg.value} -> {op}", [Edit(start, end, repr(op))]


def dim(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call):
            continue
        for kw in call.keywords:
            if kw.arg in ("dim", "gather_dim", "scatter_dimension", "split_dim", "concat_dim"):
                value = _const_int(kw.value)
                if value is None:
                    continue
                start, end = t.span(kw.value)
                for new in (value + 1, value - 1):
                    yield "dim", call.lineno, f"{kw.arg}={value} -> {new}", [Edit(start, end, str(new))]


def _peer_argument(ctx: _Context, call: ast.Call) -> ast.AST | None:
    name = ctx.c10d_name(call)
    if name in P2P or name in ROOTED:
        kw = _keyword(call, "dst" if name in ("send", "isend", "reduce", "gather") else "src")
        if kw is None:
            kw = _keyword(call, "dst") or _keyword(call, "src") or _keyword(call, "group_dst") or _keyword(call, "group_src")
        if kw is not None:
            return kw.value
        if len(call.args) >= 2:
            return call.args[1]
    if ctx.qualname(call.func).endswith("P2POp"):
        kw = _keyword(call, "peer")
        if kw is not None:
            return kw.value
        if len(call.args) >= 3:
            return call.args[2]
    return None


def src_dst(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    if ctx.world is None:
        return
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call):
            continue
        peer = _peer_argument(ctx, call)
        if peer is None:
            continue
        start, end = t.span(peer)
        old = t.text(peer)
        variants = [f"({old} + 1) % {ctx.world}"]
        variants.append(f"{ctx.world} - 1" if _const_int(peer) == 0 else "0")
        for new in variants:
            yield "src_dst", call.lineno, f"peer {old} -> {new}", [Edit(start, end, new)]


def tag(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call):
            continue
        is_p2p = ctx.c10d_name(call) in P2P or ctx.qualname(call.func).endswith("P2POp")
        if not is_p2p:
            continue
        kw = _keyword(call, "tag")
        if kw is not None:
            start, end = t.span(kw.value)
            yield "tag", call.lineno, f"tag {t.text(kw.value)} -> + 1", [Edit(start, end, f"({t.text(kw.value)}) + 1")]
        elif not any(isinstance(a, ast.Starred) for a in call.args) and len(call.args) <= (3 if "P2POp" not in ctx.qualname(call.func) else 4):
            _, end = t.span(call)
            yield "tag", call.lineno, "tag=1 added", [Edit(end - 1, end - 1, ", tag=1")]


def chunk_index(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    if ctx.world is None:
        return
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and "rank" in node.slice.id.lower():
            start, end = t.span(node.slice)
            name = node.slice.id
            for new in ("0", f"{ctx.world} - 1 - {name}"):
                yield "chunk_index", node.lineno, f"[{name}] -> [{new}]", [Edit(start, end, new)]


def slice_bounds(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Slice):
            continue
        for bound, deltas in ((node.lower, (1,)), (node.upper, (-1, 1))):
            if bound is None:
                continue
            start, end = t.span(bound)
            old = t.text(bound)
            for delta in deltas:
                new = f"({old}) {'+' if delta > 0 else '-'} 1"
                yield "slice_bounds", node.lineno, f"slice bound {old} -> {new}", [Edit(start, end, new)]


def remove_wait(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    handled = set()
    for block in _statements(ctx.tree):
        for stmt in block:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
                    and stmt.value.func.attr == "wait" and not stmt.value.args and t.alone_on_its_lines(stmt):
                start, end = t.span(stmt)
                handled.add(id(stmt.value))
                yield "remove_wait", stmt.lineno, f"{t.text(stmt)} removed", [Edit(start, end, "pass")]
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call) or id(call) in handled:
            continue
        if isinstance(call.func, ast.Attribute) and call.func.attr == "wait" and not call.args:
            start, end = t.span(call)
            yield "remove_wait", call.lineno, ".wait() removed", [Edit(start, end, f"({t.text(call.func.value)})")]
        elif ctx.qualname(call.func).endswith("wait_tensor") and call.args:
            start, end = t.span(call)
            yield "remove_wait", call.lineno, "wait_tensor removed", [Edit(start, end, f"({t.text(call.args[0])})")]


def remove_clone(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "clone":
            start, end = t.span(call)
            if not call.args and not call.keywords and ctx.qualname(call.func) != "torch.clone":
                yield "remove_clone", call.lineno, ".clone() removed", [Edit(start, end, f"({t.text(call.func.value)})")]
            elif ctx.qualname(call.func) == "torch.clone" and call.args:
                yield "remove_clone", call.lineno, "torch.clone removed", [Edit(start, end, f"({t.text(call.args[0])})")]


def swap_permute(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "permute"):
            continue
        dims = call.args
        if len(dims) == 1 and isinstance(dims[0], (ast.Tuple, ast.List)):
            dims = dims[0].elts
        for a, b in zip(dims, dims[1:]):
            if t.text(a) == t.text(b):
                continue
            (sa, ea), (sb, eb) = t.span(a), t.span(b)
            yield ("swap_permute", call.lineno, f"permute dims {t.text(a)} and {t.text(b)} swapped",
                   [Edit(sa, ea, t.text(b)), Edit(sb, eb, t.text(a))])


def drop_transpose(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call):
            continue
        start, end = t.span(call)
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("transpose", "t", "mT") \
                and ctx.qualname(call.func) not in ("torch.transpose", "torch.t"):
            yield "drop_transpose", call.lineno, f".{call.func.attr}() removed", [Edit(start, end, f"({t.text(call.func.value)})")]
        elif ctx.qualname(call.func) in ("torch.transpose", "torch.t") and call.args:
            yield "drop_transpose", call.lineno, "torch.transpose removed", [Edit(start, end, f"({t.text(call.args[0])})")]


def drop_world_scaling(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)) and _mentions_world(node.right) \
                and not _is_size_arithmetic(node):
            start, end = t.span(node)
            yield "drop_world_scaling", node.lineno, f"/ {t.text(node.right)} removed", [Edit(start, end, f"({t.text(node.left)})")]
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div) and _mentions_world(node.value) \
                and t.alone_on_its_lines(node):
            start, end = t.span(node)
            yield "drop_world_scaling", node.lineno, f"{t.text(node)} removed", [Edit(start, end, "pass")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("div_", "div") \
                and node.args and _mentions_world(node.args[0]):
            start, end = t.span(node)
            yield "drop_world_scaling", node.lineno, f".{node.func.attr}(world) removed", [Edit(start, end, f"({t.text(node.func.value)})")]


def _is_size_arithmetic(node: ast.BinOp) -> bool:
    """``HIDDEN // world`` or ``x.shape[0] / world``: a size, not a value scaling."""
    left = node.left
    if isinstance(node.op, ast.FloorDiv):
        return True
    if isinstance(left, ast.Constant) or (isinstance(left, ast.Name) and left.id.isupper()):
        return True
    return any(isinstance(n, ast.Attribute) and n.attr in ("shape", "size") for n in ast.walk(left)) or \
        any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("size", "numel", "dim")
            for n in ast.walk(left))


def add_world_scaling(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    if ctx.world is None:
        return
    for block in _statements(ctx.tree):
        for stmt in block:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and ctx.c10d_name(stmt.value) in ("all_reduce", "reduce_scatter_tensor") \
                    and stmt.value.args and isinstance(stmt.value.args[0], ast.Name) and t.alone_on_its_lines(stmt):
                _, end = t.span(stmt)
                target = stmt.value.args[0].id
                yield ("add_world_scaling", stmt.lineno, f"{target} divided by the world size after the collective",
                       [Edit(end, end, f"\n{t.indent(stmt)}{target}.div_({ctx.world})")])
    for call in ast.walk(ctx.tree):
        if isinstance(call, ast.Call) and ctx.is_value_collective(call):
            start, end = t.span(call)
            yield ("add_world_scaling", call.lineno, f"{t.text(call.func)} result divided by the world size",
                   [Edit(start, end, f"({t.text(call)} / {ctx.world})")])


def partition_stride(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call):
            continue
        for kw in call.keywords:
            if kw.arg in ("stride", "partition_stride") and _const_int(kw.value) in (1, 2):
                start, end = t.span(kw.value)
                new = 2 if _const_int(kw.value) == 1 else 1
                yield "partition_stride", call.lineno, f"{kw.arg}={_const_int(kw.value)} -> {new}", [Edit(start, end, str(new))]


def _chunk_dim(ctx: _Context, call: ast.Call) -> tuple[str, str, int] | None:
    """``torch.chunk(x, n, dim)`` / ``x.chunk(n, dim=d)``: (x, n, d) as source text and int."""
    t = ctx.text
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "chunk"):
        return None
    args = list(call.args)
    if ctx.qualname(call.func) == "torch.chunk":
        if not args:
            return None
        tensor, args = t.text(args[0]), args[1:]
    else:
        tensor = t.text(call.func.value)
    if not args:
        return None
    count = t.text(args[0])
    kw = _keyword(call, "dim")
    dim_node = kw.value if kw is not None else (args[1] if len(args) > 1 else None)
    d = 0 if dim_node is None else _const_int(dim_node)
    if d is None or d < 0 or d > 3:
        return None
    return tensor, count, d


def strided_shard(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Subscript):
            continue
        if isinstance(node.value, ast.Call) and isinstance(node.slice, ast.Name) and "rank" in node.slice.id.lower():
            found = _chunk_dim(ctx, node.value)
            if found is None:
                continue
            tensor, count, d = found
            start, end = t.span(node)
            index = ", ".join([":"] * d + [f"{node.slice.id}::{count}"])
            yield ("strided_shard", node.lineno, f"contiguous chunk -> strided slice [{index}]",
                   [Edit(start, end, f"({tensor})[{index}]")])
        elif isinstance(node.slice, (ast.Slice, ast.Tuple)):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            last = parts[-1]
            if not (isinstance(last, ast.Slice) and last.step is not None and last.upper is None
                    and last.lower is not None and "rank" in t.text(last.lower).lower()):
                continue
            if not all(isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None
                       for p in parts[:-1]):
                continue
            start, end = t.span(node)
            yield ("strided_shard", node.lineno, "strided slice -> contiguous chunk",
                   [Edit(start, end, f"torch.chunk({t.text(node.value)}, {t.text(last.step)}, dim={len(parts) - 1})"
                                     f"[{t.text(last.lower)}]")])


def fused_order(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for node in ast.walk(ctx.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)):
            continue
        elts = node.targets[0].elts
        value = node.value
        splits = isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in ("chunk", "split", "tensor_split", "unbind")
        if len(elts) == 2 and splits and all(isinstance(e, ast.Name) for e in elts):
            (sa, ea), (sb, eb) = t.span(elts[0]), t.span(elts[1])
            yield ("fused_order", node.lineno, f"fused halves {elts[0].id}, {elts[1].id} swapped",
                   [Edit(sa, ea, elts[1].id), Edit(sb, eb, elts[0].id)])


_LAYOUT_FLAGS = ("gather_output", "input_is_parallel", "tensor_parallel_output_grad", "sequence_parallel",
                 "skip_bias_add", "use_local_output", "async_op")


def parallel_flag(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if not isinstance(call, ast.Call):
            continue
        for kw in call.keywords:
            if kw.arg in _LAYOUT_FLAGS and kw.arg != "async_op" and isinstance(kw.value, ast.Constant) \
                    and isinstance(kw.value.value, bool):
                start, end = t.span(kw.value)
                yield ("parallel_flag", call.lineno, f"{kw.arg}={kw.value.value} -> {not kw.value.value}",
                       [Edit(start, end, str(not kw.value.value))])


def plan_style(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    swap = {"ColwiseParallel": "RowwiseParallel", "RowwiseParallel": "ColwiseParallel"}
    for call in ast.walk(ctx.tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in swap:
            start, end = t.span(call.func)
            yield ("plan_style", call.lineno, f"{call.func.id} -> {swap[call.func.id]}",
                   [Edit(start, end, swap[call.func.id])])


def swap_int_args(ctx: _Context) -> Iterator[Site]:
    t = ctx.text
    for call in ast.walk(ctx.tree):
        if not (isinstance(call, ast.Call) and (ctx.is_value_collective(call) or ctx.is_c10d(call))):
            continue
        args = call.args
        for a, b in zip(args, args[1:]):
            if _const_int(a) is not None and _const_int(b) is not None and _const_int(a) != _const_int(b):
                (sa, ea), (sb, eb) = t.span(a), t.span(b)
                yield ("swap_int_args", call.lineno, f"arguments {t.text(a)} and {t.text(b)} swapped",
                       [Edit(sa, ea, t.text(b)), Edit(sb, eb, t.text(a))])


def backward_identity(ctx: _Context) -> Iterator[Site]:
    """In ``def backward(ctx, grad...)`` of an autograd Function: a returned call (the communication
    or re-layout of the gradient) becomes the incoming gradient itself."""
    t = ctx.text
    for cls in ast.walk(ctx.tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "backward" and len(fn.args.args) >= 2):
                continue
            grad = fn.args.args[1].arg if fn.args.args[0].arg == "ctx" else None
            if grad is None and fn.args.vararg is not None:
                grad = f"{fn.args.vararg.arg}[0]"
            if grad is None:
                continue
            for ret in ast.walk(fn):
                if not isinstance(ret, ast.Return) or ret.value is None:
                    continue
                values = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
                for v in values:
                    if isinstance(v, ast.Call):
                        start, end = t.span(v)
                        yield ("backward_identity", v.lineno, f"{cls.name}.backward returns {grad} unchanged",
                               [Edit(start, end, grad)])


OPERATORS: dict[str, Operator] = {op.__name__: op for op in (
    drop_collective, duplicate_collective, move_collective, swap_send_recv, reduce_op, dim, src_dst, tag,
    chunk_index, slice_bounds, remove_wait, remove_clone, swap_permute, drop_transpose,
    drop_world_scaling, add_world_scaling, partition_stride, strided_shard, fused_order, parallel_flag, plan_style,
    swap_int_args, backward_identity,
)}


def _normal_form(source: str) -> str | None:
    try:
        return ast.dump(ast.parse(source))
    except SyntaxError:
        return None


def mutants_of(origin: str, source: str, operators: list[str] | None = None) -> list[Mutant]:
    """Every mutant of ``source`` by the named operators (all by default): one per site and
    variant, each parsing as Python and differing from the original and from each other
    (compared as syntax trees, so formatting-only differences count as the same mutant)."""
    tree = ast.parse(source)
    ctx = _Context(tree, _Text(source))
    seen = {_normal_form(source)}
    found: list[Mutant] = []
    for name in operators or list(OPERATORS):
        for operator, line, description, edits in OPERATORS[name](ctx):
            mutated = apply_edits(source, edits)
            form = _normal_form(mutated)
            if form is None or form in seen:
                continue
            seen.add(form)
            found.append(Mutant(origin, operator, line, description, mutated))
    return found


def stratified_sample(mutants: list[Mutant], count: int, seed: int) -> list[Mutant]:
    """``count`` mutants chosen with ``seed``, taking operators in turn (then files in turn
    within an operator) so that a small sample mixes operators and files."""
    import random

    rng = random.Random(seed)
    by_operator: dict[str, dict[str, list[Mutant]]] = {}
    for m in mutants:
        by_operator.setdefault(m.operator, {}).setdefault(m.origin, []).append(m)
    queues = {}
    for op, by_file in by_operator.items():
        files = sorted(by_file)
        rng.shuffle(files)
        for f in files:
            rng.shuffle(by_file[f])
        order = []
        while any(by_file[f] for f in files):
            order += [by_file[f].pop() for f in files if by_file[f]]
        queues[op] = order
    ops = sorted(queues)
    rng.shuffle(ops)
    picked: list[Mutant] = []
    while len(picked) < count and any(queues[o] for o in ops):
        for op in ops:
            if queues[op] and len(picked) < count:
                picked.append(queues[op].pop(0))
    return picked
