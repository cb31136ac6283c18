"""Lift kernels from source text with Python's ``ast`` (no tvm / tilelang needed).

Two spellings are read, both as a list of recognised idioms:

* TileLang source: ``with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as
  (bx, by)``, ``T.alloc_shared/alloc_fragment/alloc_local``, ``T.clear``, ``T.fill``,
  ``T.copy``, ``T.gemm``, ``T.reduce_*``, ``T.atomic_add``, ``T.Pipelined``,
  ``T.Parallel``, ``T.serial``, element-wise assignments;
* TVMScript as printed by ``PrimFunc.script()``: ``T.match_buffer``, ``T.thread_binding``,
  ``T.sblock_alloc_buffer``, ``T.region(...)`` operands, positional ``T.gemm`` /
  ``T.reduce`` / ``T.atomicadd`` arguments.

Anything else inside a kernel raises :class:`Unsupported` with its line, never a guess.
"""
from __future__ import annotations

import ast
from typing import Callable

from .errors import LiftInputError, Unsupported
from .program import (FRAGMENT, GLOBAL, LOCAL, PARALLEL, PIPELINED, SERIAL, SHARED, BinOp, Buffer, Call,
                      Const, Expr, GridAxis, If, Kernel, LiftResult, Load, Loop, Region, Select, Stmt,
                      Store, SYNC_THREADS, THREAD_INDEX, TileOp, UnOp, Var, fold_const, uses_thread_index,
                      without_block_barriers)
from .size_env import SizeEnv, const_value, factory_env, find_call, module_env

_DTYPES = {"float": "float32", "half": "float16", "float32": "float32", "float16": "float16",
           "bfloat16": "bfloat16", "float64": "float64", "int32": "int32", "int8": "int8",
           "int64": "int64", "bool": "bool", "float8_e4m3": "float8_e4m3", "float8_e5m2": "float8_e5m2"}
_PREFIXES = ("T.", "tl.", "tilelang.language.", "tir.", "tvm.tir.", "tvm.script.tir.")
_REFERENCE_NAMES = ("ref_program", "reference", "ref", "ref_fn", "torch_ref", "reference_program")
_IGNORED_CALLS = {"reads", "writes", "sblock_attr", "block_attr", "func_attr", "annotate_layout", "use_swizzle",
                  "no_set_max_nreg", "set_max_nreg", "inc_max_nreg", "dec_max_nreg", "disable_warp_group_reg_alloc",
                  "annotate_l2_hit_ratio", "print", "annotate_padding", "annotate_safe_value"}
_UNARY = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
          "abs": "abs", "tanh": "tanh", "sigmoid": "sigmoid", "fabs": "abs"}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _short(node: ast.AST) -> str:
    """``T.copy`` -> ``copy``; names without a known prefix are returned whole."""
    name = _dotted(node)
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _dtype(value: object) -> str:
    text = str(value).replace("torch.", "").replace("T.", "")
    return _DTYPES.get(text, text)


# --- finding kernels -----------------------------------------------------------------------

def _is_prim_func(func: ast.FunctionDef) -> bool:
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if _dotted(target).endswith("prim_func"):
            return True
    return False


def _prim_funcs(tree: ast.Module) -> list[tuple[ast.FunctionDef, ast.FunctionDef | None]]:
    """(prim_func, enclosing factory or None), in file order."""
    found: list[tuple[ast.FunctionDef, ast.FunctionDef | None]] = []

    def visit(node: ast.AST, factory: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef):
                if _is_prim_func(child):
                    found.append((child, factory))
                else:
                    visit(child, child)
            elif isinstance(child, ast.ClassDef):
                visit(child, factory)
    visit(tree, None)
    return found


def parse_file(source: str, file: str) -> ast.Module:
    try:
        return ast.parse(source, filename=file)
    except SyntaxError as exc:
        raise LiftInputError(f"expected valid Python: {exc.msg}", file, exc.lineno) from None


def lift_source(source: str, file: str, kernel: str | None = None) -> LiftResult:
    """Lift the kernel(s) of ``source``; with ``kernel`` only the one so named (the
    prim_func's own name or its factory's)."""
    tree = parse_file(source, file)
    env = module_env(tree)
    funcs = _prim_funcs(tree)
    if not funcs:
        raise LiftInputError("expected a @T.prim_func kernel in the file", file, 1)
    if kernel is not None:
        funcs = [(f, fac) for f, fac in funcs if kernel in (f.name, fac.name if fac else None)]
        if not funcs:
            names = ", ".join(sorted({(fac or f).name for f, fac in _prim_funcs(tree)}))
            raise LiftInputError(f"expected --kernel to name one of: {names}; got {kernel!r}", file, 1)
    result = LiftResult()
    for func, factory in funcs:
        kernel_env = env
        if factory is not None:
            kernel_env = factory_env(factory, env, find_call(tree, factory.name, env))
        reader = _KernelReader(func, kernel_env, file, factory.name if factory else None)
        result.kernels.append(reader.read())
        result.unsupported.extend(reader.unsupported)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (node.name in _REFERENCE_NAMES or node.name.startswith("ref_")):
            result.references[node.name] = node
    return result


# --- reading one kernel --------------------------------------------------------------------

StmtHandler = Callable[["_KernelReader", ast.Call, int], list[Stmt]]
_STMT_CALLS: dict[str, StmtHandler] = {}


def _stmt_call(*names: str) -> Callable[[StmtHandler], StmtHandler]:
    """Register the handler of a statement-level ``T.<name>(...)`` call."""
    def register(handler: StmtHandler) -> StmtHandler:
        for name in names:
            _STMT_CALLS[name] = handler
        return handler
    return register


class _KernelReader:
    def __init__(self, func: ast.FunctionDef, env: SizeEnv, file: str, factory: str | None):
        self.func, self.env, self.file, self.factory = func, env, file, factory
        self.params: list[Buffer] = []
        self.allocs: list[Buffer] = []
        self.grid: list[GridAxis] = []
        self.grid_line: int | None = None
        self.threads: int | None = None
        self.lets: dict[str, Expr] = {}
        self.loop_vars: set[str] = set()
        self.thread_vars: dict[str, int] = {}  # thread index name -> its axis (0: x, 1: y, 2: z)
        self.thread_dims: tuple[int, ...] | None = ()  # () : TileLang's default block
        self.handles: dict[str, int] = {}
        self.unsupported: list[tuple[int | None, str]] = []

    # -- entry --
    def read(self) -> Kernel:
        self._signature()
        body = self._stmts(self.func.body)
        if not uses_thread_index(body):
            body = without_block_barriers(body)
        used = {name for name, value in self.env.symbols.items()}
        sizes = tuple((name, self.env.symbols[name]) for name in self.env.symbols if name in used)
        return Kernel(name=self.factory or self.func.name, params=tuple(self.params), allocs=tuple(self.allocs),
                      grid=tuple(self.grid), body=body, sizes=sizes, threads=self.threads,
                      thread_dims=self.thread_dims or (),
                      line=self.func.lineno, grid_line=self.grid_line, source=self.file)

    def _signature(self) -> None:
        for arg in self.func.args.args:
            ann = arg.annotation
            if isinstance(ann, ast.Call) and _short(ann.func) in ("Tensor", "Buffer", "StridedTensor"):
                self.params.append(self._buffer(arg.arg, ann, GLOBAL))
            elif ann is not None and _short(ann) == "handle":
                self.handles[arg.arg] = len(self.handles)
            else:
                raise LiftInputError(f"expected parameter {arg.arg!r} to be annotated T.Tensor((...), dtype)",
                                     self.file, arg.lineno)

    def _buffer(self, name: str, call: ast.Call, scope: str) -> Buffer:
        args = list(call.args)
        kw = {k.arg: k.value for k in call.keywords}
        if scope == GLOBAL and self.handles and args and isinstance(args[0], ast.Name) and args[0].id in self.handles:
            args = args[1:]  # T.match_buffer(A_handle, shape, dtype)
        shape_node = args[0] if args else kw.get("shape")
        dtype_node = args[1] if len(args) > 1 else kw.get("dtype")
        if shape_node is None:
            raise LiftInputError(f"expected a shape for buffer {name!r}", self.file, call.lineno)
        elts = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
        shape = tuple(self._expr(e) for e in elts)
        dtype = "float32"
        if dtype_node is not None:
            try:
                dtype = _dtype(const_value(dtype_node, self.env))
            except KeyError:
                dtype = _dtype(_dotted(dtype_node) or "float32")
        if "scope" in kw:
            scope = _scope(str(const_value(kw["scope"], self.env)))
        return Buffer(name, shape, dtype, scope, call.lineno)

    # -- statements --
    def _stmts(self, body: list[ast.stmt]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for node in body:
            try:
                out.extend(self._stmt(node))
            except Unsupported as exc:
                self.unsupported.append((exc.line, exc.reason))
        return tuple(out)

    def _stmt(self, node: ast.stmt) -> list[Stmt]:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return []  # docstring
        if isinstance(node, ast.Pass):
            return []
        if isinstance(node, ast.With):
            return self._with(node)
        if isinstance(node, ast.For):
            return self._for(node)
        if isinstance(node, ast.If):
            cond = self._expr(node.test)
            return [If(cond, self._stmts(node.body), self._stmts(node.orelse), node.lineno)]
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            name = _short(node.value.func)
            if name in _IGNORED_CALLS:
                return []
            handler = _STMT_CALLS.get(name)
            if handler is None:
                raise Unsupported(node.lineno, f"tile op {_dotted(node.value.func)}(...) is not modelled")
            return handler(self, node.value, node.lineno)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            return self._assign(node)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(node.op))
            if op is None:
                raise Unsupported(node.lineno, "augmented assignment operator is not modelled")
            buf, idx = self._element(node.target)
            value = BinOp(op, Load(buf, idx), self._expr(node.value))
            return [Store(buf, idx, value, False, node.lineno)]
        raise Unsupported(node.lineno, f"statement {type(node).__name__} inside a kernel is not modelled")

    def _with(self, node: ast.With) -> list[Stmt]:
        item = node.items[0]
        call = item.context_expr
        name = _short(call.func) if isinstance(call, ast.Call) else ""
        if name == "Kernel":
            extents = [self._expr(a) for a in call.args]
            for kw in call.keywords:
                if kw.arg == "threads":
                    try:
                        value = const_value(kw.value, self.env)
                        self.threads = value if isinstance(value, int) else None
                    except KeyError:
                        value = self.threads = None
                    dims = value if isinstance(value, (tuple, list)) else (value,)
                    # the threads per axis (None: not known to the reader, so per-thread code is refused)
                    self.thread_dims = tuple(dims) if all(isinstance(d, int) for d in dims) else None
            target = item.optional_vars
            names = [t.id for t in target.elts] if isinstance(target, ast.Tuple) else \
                [target.id] if isinstance(target, ast.Name) else []
            if len(names) != len(extents):
                raise Unsupported(node.lineno, "T.Kernel must bind one block index per grid extent")
            self.grid = [GridAxis(n, e) for n, e in zip(names, extents)]
            self.grid_line = node.lineno
            return list(self._stmts(node.body))
        if name in ("sblock", "block", "Block"):
            return list(self._stmts(node.body))
        raise Unsupported(node.lineno, f"with-statement {_dotted(getattr(call, 'func', call))} is not modelled")

    def _for(self, node: ast.For) -> list[Stmt]:
        if not isinstance(node.iter, ast.Call):
            raise Unsupported(node.lineno, "loop over a non-call iterator is not modelled")
        call, kind_name = node.iter, _short(node.iter.func)
        kw = {k.arg: k.value for k in call.keywords}
        targets = [t.id for t in node.target.elts] if isinstance(node.target, ast.Tuple) else [node.target.id]
        if kind_name == "thread_binding":
            thread = str(const_value(kw.get("thread", call.args[-1]), self.env))
            extent = self._expr(call.args[0])
            if thread.startswith("blockIdx"):
                self.grid.append(GridAxis(targets[0], extent))
                self.grid_line = self.grid_line or node.lineno
                self.loop_vars.add(targets[0])
                return list(self._stmts(node.body))
            if thread.startswith("threadIdx.") and thread[-1] in "xyz":  # the block's thread index, by a loop
                self.thread_vars[targets[0]] = "xyz".index(thread[-1])
                return list(self._stmts(node.body))
            raise Unsupported(node.lineno, f"explicit {thread} binding is not modelled")
        kinds = {"Pipelined": PIPELINED, "serial": SERIAL, "range": SERIAL, "Serial": SERIAL, "unroll": SERIAL,
                 "Parallel": PARALLEL, "parallel": PARALLEL, "vectorized": PARALLEL, "grid": SERIAL}
        if kind_name not in kinds:
            raise Unsupported(node.lineno, f"loop kind {_dotted(call.func)} is not modelled")
        kind = kinds[kind_name]
        stages = None
        if "num_stages" in kw:
            stages = _int_or_none(kw["num_stages"], self.env)
        if "annotations" in kw and isinstance(kw["annotations"], ast.Dict):
            for key, value in zip(kw["annotations"].keys, kw["annotations"].values):
                if isinstance(key, ast.Constant) and key.value == "num_stages":
                    kind, stages = PIPELINED, _int_or_none(value, self.env)
        args = list(call.args)
        if kind_name in ("serial", "range", "Serial", "unroll") and len(args) == 2:
            start = self._expr(args[0])
            if start != Const(0):
                raise Unsupported(node.lineno, "loops with a non-zero start are not modelled")
            args = args[1:]
        if len(args) != len(targets):
            raise Unsupported(node.lineno, "loop must bind one variable per extent")
        self.loop_vars.update(targets)
        body = self._stmts(node.body)
        for var, extent in reversed(list(zip(targets, args))):
            body = (Loop(var, self._expr(extent), kind, body, node.lineno, stages),)
        return list(body)

    def _assign(self, node: ast.Assign | ast.AnnAssign) -> list[Stmt]:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if len(targets) != 1 or value is None:
            raise Unsupported(node.lineno, "multiple assignment targets are not modelled")
        target = targets[0]
        if isinstance(target, ast.Subscript):
            buf, idx = self._element(target)
            return [Store(buf, idx, self._expr(value), False, node.lineno)]
        if not isinstance(target, ast.Name):
            raise Unsupported(node.lineno, "assignment target is not modelled")
        if isinstance(value, ast.Call):
            name = _short(value.func)
            scope = {"alloc_shared": SHARED, "alloc_fragment": FRAGMENT, "alloc_local": LOCAL,
                     "alloc_buffer": SHARED, "sblock_alloc_buffer": SHARED, "decl_buffer": SHARED}.get(name)
            if scope is not None:
                self.allocs.append(self._buffer(target.id, value, scope))
                return []
            if name == "match_buffer":
                self.params.append(self._buffer(target.id, value, GLOBAL))
                return []
            if name in ("launch_thread_idx", "get_thread_binding"):
                axis = const_value(value.args[0], self.env) if value.args else 0
                if axis not in (0, 1, 2):
                    raise Unsupported(node.lineno, "a thread index of an unknown axis is not modelled")
                self.thread_vars[target.id] = axis
                return []
            if name == "launch_thread":
                tag = str(const_value(value.args[0], self.env))
                if tag.startswith("blockIdx"):
                    self.grid.append(GridAxis(target.id, self._expr(value.args[1])))
                    self.grid_line = self.grid_line or node.lineno
                elif tag.startswith("threadIdx.") and tag[-1] in "xyz":
                    self.thread_vars[target.id] = "xyz".index(tag[-1])
                else:
                    raise Unsupported(node.lineno, f"{tag} is not modelled")
                return []
            if name in ("alloc_var",):
                raise Unsupported(node.lineno, "T.alloc_var scalars are not modelled; use T.alloc_local((1,), dtype)")
        self.lets[target.id] = self._expr(value)
        return []

    def _element(self, node: ast.Subscript) -> tuple[str, tuple[Expr, ...]]:
        if not isinstance(node.value, ast.Name):
            raise Unsupported(node.lineno, "subscript of a non-buffer is not modelled")
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(e, ast.Slice) for e in elts):
            raise Unsupported(node.lineno, "slice assignment outside T.copy is not modelled")
        self._known_buffer(node.value.id, node.lineno)
        return node.value.id, tuple(self._expr(e) for e in elts)

    def _known_buffer(self, name: str, line: int) -> Buffer:
        for buf in self.params + self.allocs:
            if buf.name == name:
                return buf
        raise Unsupported(line, f"{name!r} is not a buffer of this kernel")

    # -- operands --
    def region(self, node: ast.AST) -> Region:
        line = getattr(node, "lineno", None)
        if isinstance(node, ast.Call) and _short(node.func) == "region":
            inner = self.region(node.args[0])
            extents = tuple(self._expr(e) for e in node.args[2:])
            pad = len(inner.starts) - len(extents)
            return Region(inner.buffer, inner.starts, (Const(1),) * pad + extents)
        if isinstance(node, ast.Name):
            buf = self._known_buffer(node.id, line)
            return Region(buf.name, tuple(Const(0) for _ in buf.shape), buf.shape)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            buf = self._known_buffer(node.value.id, line)
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if not any(isinstance(e, ast.Slice) for e in elts):
                return Region(buf.name, tuple(self._expr(e) for e in elts), None)
            starts, extents = [], []
            for axis, elt in enumerate(elts):
                if isinstance(elt, ast.Slice):
                    lo = self._expr(elt.lower) if elt.lower is not None else Const(0)
                    hi = self._expr(elt.upper) if elt.upper is not None else buf.shape[axis]
                    starts.append(lo)
                    extents.append(_sub(hi, lo))
                else:
                    starts.append(self._expr(elt))
                    extents.append(Const(1))
            return Region(buf.name, tuple(starts), tuple(extents))
        raise Unsupported(line, "tile-op operand must be a buffer, an indexed buffer or a slice")

    # -- expressions --
    def _expr(self, node: ast.AST) -> Expr:
        line = getattr(node, "lineno", None)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (int, float, bool)):
                return Const(node.value)
            raise Unsupported(line, f"constant {node.value!r} is not a number")
        if isinstance(node, ast.Name):
            return self._name(node.id, line)
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
            if type(node.op) not in ops:
                raise Unsupported(line, f"operator {type(node.op).__name__} is not modelled")
            return BinOp(ops[type(node.op)], self._expr(node.left), self._expr(node.right))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return fold_const(UnOp("neg", self._expr(node.operand)))
            if isinstance(node.op, ast.Not):
                return UnOp("not", self._expr(node.operand))
            if isinstance(node.op, ast.UAdd):
                return self._expr(node.operand)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
            return BinOp(ops[type(node.ops[0])], self._expr(node.left), self._expr(node.comparators[0]))
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            out = self._expr(node.values[0])
            for value in node.values[1:]:
                out = BinOp(op, out, self._expr(value))
            return out
        if isinstance(node, ast.Subscript):
            buf, idx = self._element(node)
            return Load(buf, idx)
        if isinstance(node, ast.Call):
            return self._call_expr(node)
        raise Unsupported(line, f"expression {type(node).__name__} is not modelled")

    def _name(self, name: str, line: int | None) -> Expr:
        if name in self.thread_vars:  # per-thread code: each thread runs it with its own index
            if self.thread_dims is None:
                raise Unsupported(line, f"per-thread code ({name}) in a block whose thread count the source reader "
                                  "cannot tell is not modelled")
            return Var(THREAD_INDEX[self.thread_vars[name]])
        if name in self.lets:
            return self.lets[name]
        if name in self.loop_vars or any(axis.var == name for axis in self.grid):
            return Var(name)
        found = self.env.lookup(name)
        if isinstance(found, (Var, BinOp, Const, UnOp)):
            return found
        if isinstance(found, (int, float)) and not isinstance(found, bool):
            return Const(found)
        raise LiftInputError(f"expected {name!r} to be a size, loop variable or constant", self.file, line)

    def _call_expr(self, node: ast.Call) -> Expr:
        name, line = _short(node.func), node.lineno
        args = node.args
        if isinstance(node.func, ast.Attribute) and node.func.attr == "astype" and not _dotted(node.func).startswith("T."):
            return Call("cast", (self._expr(node.func.value),), _dtype(const_value(args[0], self.env)))
        if name in _UNARY and len(args) == 1:
            return Call(_UNARY[name], (self._expr(args[0]),))
        if name in ("max", "min") and len(args) == 2:
            return BinOp(name, self._expr(args[0]), self._expr(args[1]))
        if name in ("ceildiv", "cdiv") and len(args) == 2:
            return BinOp("ceildiv", self._expr(args[0]), self._expr(args[1]))
        if name in ("floordiv",):
            return BinOp("//", self._expr(args[0]), self._expr(args[1]))
        if name in ("floormod",):
            return BinOp("%", self._expr(args[0]), self._expr(args[1]))
        if name in ("if_then_else", "Select"):
            return Select(self._expr(args[0]), self._expr(args[1]), self._expr(args[2]))
        if name in ("cast", "Cast"):
            first, second = (args[0], args[1]) if len(args) == 2 else (args[0], None)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                first, second = second, first  # tir.Cast(dtype, value)
            dtype = _dtype(const_value(second, self.env)) if second is not None else None
            return Call("cast", (self._expr(first),), dtype)
        if name == "tvm_warp_shuffle" and len(args) == 5:
            return Call(name, tuple(self._expr(a) for a in args))
        if name == "infinity":
            return Const(float("inf"))
        if name in ("max_value", "min_value"):
            return Const(float("inf") if name == "max_value" else float("-inf"))
        if name in _DTYPES or name in ("float32", "float16", "bfloat16", "int32", "bool", "int64"):
            if len(args) == 1:
                return self._expr(args[0])
        raise Unsupported(line, f"call {_dotted(node.func)}(...) in an expression is not modelled")


def _scope(text: str) -> str:
    if text.startswith("shared"):
        return SHARED
    if "fragment" in text:
        return FRAGMENT
    if text.startswith("local"):
        return LOCAL
    return GLOBAL


def _sub(hi: Expr, lo: Expr) -> Expr:
    if lo == Const(0):
        return hi
    if isinstance(hi, BinOp) and hi.op == "+" and hi.a == lo:
        return hi.b
    return BinOp("-", hi, lo)


def _int_or_none(node: ast.AST, env: SizeEnv) -> int | None:
    try:
        value = const_value(node, env)
    except KeyError:
        return None
    return value if isinstance(value, int) else None


def _bool_kw(reader: _KernelReader, call: ast.Call, name: str, position: int | None, default: bool) -> bool:
    for kw in call.keywords:
        if kw.arg == name:
            return bool(_bool_value(kw.value, reader))
    if position is not None and len(call.args) > position:
        return bool(_bool_value(call.args[position], reader))
    return default


def _bool_value(node: ast.AST, reader: _KernelReader) -> object:
    if isinstance(node, ast.Call) and _short(node.func) == "bool":
        node = node.args[0]
    return const_value(node, reader.env)


# --- statement-level tile ops (one handler per idiom) -------------------------------------

@_stmt_call("sync_threads")
def _sync_threads(reader: "_KernelReader", call: ast.Call, line: int) -> list[Stmt]:
    if call.args or call.keywords:
        raise Unsupported(line, "a named barrier of some threads is not modelled")
    return [TileOp(SYNC_THREADS, (), (), line)]


@_stmt_call("clear")
def _clear(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    return [TileOp("fill", (reader.region(call.args[0]), Const(0)), (), line)]


@_stmt_call("fill")
def _fill(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    value = reader._expr(call.args[1])
    return [TileOp("fill", (reader.region(call.args[0]), value), (), line)]


@_stmt_call("copy")
def _copy(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    return [TileOp("copy", (reader.region(call.args[0]), reader.region(call.args[1])), (), line)]


@_stmt_call("gemm", "gemm_v1", "gemm_v2", "wgmma_gemm")
def _gemm(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    a, b, c = (reader.region(arg) for arg in call.args[:3])
    printed = len(call.args) > 5  # PrimFunc.script(): A, B, C, trans_A, trans_B, M, N, K, policy, clear_accum
    attrs = (("transpose_A", _bool_kw(reader, call, "transpose_A", 3, False)),
             ("transpose_B", _bool_kw(reader, call, "transpose_B", 4, False)),
             ("clear_accum", _bool_kw(reader, call, "clear_accum", 9 if printed else None, False)))
    return [TileOp("gemm", (a, b, c), attrs, line)]


def _reduce_handler(op: str) -> StmtHandler:
    def handler(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
        src, dst = reader.region(call.args[0]), reader.region(call.args[1])
        dim = _int_or_none(call.args[2], reader.env) if len(call.args) > 2 else None
        for kw in call.keywords:
            if kw.arg == "dim":
                dim = _int_or_none(kw.value, reader.env)
        clear = _bool_kw(reader, call, "clear", 3, True)
        return [TileOp("reduce", (src, dst), (("op", op), ("dim", -1 if dim is None else dim), ("clear", clear)), line)]
    return handler


for _op in ("sum", "max", "min", "abssum", "absmax"):
    _STMT_CALLS[f"reduce_{_op}"] = _reduce_handler(_op)


@_stmt_call("reduce")
def _reduce_printed(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    """``T.reduce(src, dst, "max", dim, clear)`` as printed by PrimFunc.script()."""
    src, dst = reader.region(call.args[0]), reader.region(call.args[1])
    op = str(const_value(call.args[2], reader.env))
    dim = _int_or_none(call.args[3], reader.env)
    clear = bool(_bool_value(call.args[4], reader)) if len(call.args) > 4 else True
    return [TileOp("reduce", (src, dst), (("op", op), ("dim", dim), ("clear", clear)), line)]


@_stmt_call("atomic_add", "atomic_addx2", "atomic_addx4")
def _atomic_add(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    """``T.atomic_add(dst, value)``: element form when ``dst`` is a single element."""
    dst_node, value_node = call.args[0], call.args[1]
    if isinstance(dst_node, ast.Subscript) and not isinstance(value_node, ast.Name):
        buf, idx = reader._element(dst_node)
        return [Store(buf, idx, reader._expr(value_node), True, line)]
    return [TileOp("atomic_add", (reader.region(value_node), reader.region(dst_node)), (), line)]


@_stmt_call("atomicadd")
def _atomicadd_printed(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    return [TileOp("atomic_add", (reader.region(call.args[0]), reader.region(call.args[1])), (), line)]


@_stmt_call("atomic_add_elem_op")
def _atomic_elem_printed(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    ptr = call.args[0]
    target = ptr.args[0] if isinstance(ptr, ast.Call) and _short(ptr.func) == "access_ptr" else ptr
    buf, idx = reader._element(target)
    return [Store(buf, idx, reader._expr(call.args[1]), True, line)]


@_stmt_call("evaluate")
def _evaluate(reader: _KernelReader, call: ast.Call, line: int) -> list[Stmt]:
    inner = call.args[0]
    if isinstance(inner, ast.Call) and _short(inner.func) in _STMT_CALLS:
        return _STMT_CALLS[_short(inner.func)](reader, inner, line)
    raise Unsupported(line, "T.evaluate of this expression is not modelled")
