"""What the user's file says, read statically with ``ast``: the facts a translation must respect.

The LLM path is only trustworthy if its IR can be held against the source without trusting
the model.  This module extracts, once per file:

* *sites*: every distributed construct (``dist.*`` collectives, Megatron mappings and
  parallel layers, DTensor plan entries, calls through function tables that hold
  collectives) with the lines an IR op for it may cite, the op kinds it can produce, whether
  an op is *required* (the construct runs unconditionally on the entry's path) and how many
  ops it can account for at most (a helper called twice accounts for two);
* the entry, its parameters and how many values it returns;
* ``example_inputs()`` shapes and dtypes (literal sizes and module constants);
* the mesh the file builds (``init_device_mesh`` / ``initialize_model_parallel``);
* every identifier, so invented tensor names stand out.

It never executes the file.  Where static reading cannot decide (a call through a table, a
loop), it errs toward *allowing* an op but *not requiring* one — the execution triage in
``agent/triage.py`` covers what this leaves open.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

# torch.distributed function -> IR op kinds it can become.
DIST_COLLECTIVES: dict[str, tuple[str, ...]] = {
    "all_reduce": ("all_reduce",), "all_gather": ("all_gather",), "all_gather_into_tensor": ("all_gather",),
    "_all_gather_base": ("all_gather",), "all_gather_tensor": ("all_gather",),
    "reduce_scatter": ("reduce_scatter",), "reduce_scatter_tensor": ("reduce_scatter",),
    "_reduce_scatter_base": ("reduce_scatter",), "all_to_all": ("all_to_all",),
    "all_to_all_single": ("all_to_all",), "broadcast": ("broadcast",), "reduce": ("reduce",),
    "scatter": ("scatter",), "gather": ("gather",), "send": ("send",), "recv": ("recv",),
    "isend": ("isend",), "irecv": ("irecv",),
}
# Calls that may produce ops but need not (no coverage requirement).
DIST_OPTIONAL: dict[str, tuple[str, ...]] = {
    "batch_isend_irecv": ("isend", "irecv"), "get_rank": ("rank",), "get_world_size": ("world_size",),
    "barrier": (),
}
# name -> (kinds it may produce, kinds of which one is required)
MEGATRON_MAPPINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "copy_to_tensor_model_parallel_region": (("identity",), ()),
    "reduce_from_tensor_model_parallel_region": (("all_reduce",), ("all_reduce",)),
    "scatter_to_tensor_model_parallel_region": (("local_chunk", "chunk", "split", "slice"),
                                                ("local_chunk", "chunk", "split", "slice")),
    "gather_from_tensor_model_parallel_region": (("all_gather",), ("all_gather",)),
    "scatter_to_sequence_parallel_region": (("local_chunk", "chunk", "split", "slice"),
                                            ("local_chunk", "chunk", "split", "slice")),
    "gather_from_sequence_parallel_region": (("all_gather",), ("all_gather",)),
    "reduce_scatter_to_sequence_parallel_region": (("reduce_scatter",), ("reduce_scatter",)),
    "all_gather_last_dim_from_tensor_parallel_region": (("all_gather",), ("all_gather",)),
    "reduce_scatter_last_dim_to_tensor_parallel_region": (("reduce_scatter",), ("reduce_scatter",)),
    "vocab_parallel_cross_entropy": (("vocab_parallel_cross_entropy", "all_reduce", "cross_entropy"),
                                     ("vocab_parallel_cross_entropy", "all_reduce")),
}
_LOCAL = ("linear", "matmul", "add", "identity", "reshape", "transpose")
MEGATRON_LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ColumnParallelLinear": (_LOCAL + ("all_gather", "local_chunk"), ("linear", "matmul")),
    "RowParallelLinear": (_LOCAL + ("all_reduce", "reduce_scatter", "local_chunk"), ("all_reduce", "reduce_scatter")),
    "VocabParallelEmbedding": (("vocab_parallel_embedding", "embedding", "all_reduce", "reduce_scatter", "identity"),
                               ("vocab_parallel_embedding", "all_reduce", "reduce_scatter")),
}
_REDIST = ("all_gather", "all_reduce", "reduce_scatter", "all_to_all", "local_chunk", "identity")
DTENSOR_STYLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ColwiseParallel": (_LOCAL + _REDIST + ("embedding",), _LOCAL + _REDIST + ("embedding",)),
    "RowwiseParallel": (_LOCAL + _REDIST + ("embedding",), ("all_reduce", "reduce_scatter", "linear", "matmul")),
    "SequenceParallel": (_REDIST + ("layer_norm", "rms_norm", "add", "mul"),
                         _REDIST + ("layer_norm", "rms_norm", "add", "mul")),
    "PrepareModuleInput": (_REDIST, ()), "PrepareModuleOutput": (_REDIST, ()),
    "PrepareModuleInputOutput": (_REDIST, ()),
}
# DTensor calls and methods that may move data; never required (they can be no-ops).
DTENSOR_CALLS: dict[str, tuple[str, ...]] = {
    "distribute_tensor": ("local_chunk", "broadcast", "identity"), "full_tensor": ("all_gather", "all_reduce", "identity"),
    "redistribute": _REDIST, "from_local": ("identity",), "to_local": ("identity",),
    "loss_parallel": ("vocab_parallel_cross_entropy", "all_reduce", "cross_entropy"),
    "parallelize_module": (), "distribute_module": _REDIST,
}
_TENSOR_MAKERS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "arange", "tensor"}


@dataclass(frozen=True)
class Site:
    """A distributed construct and what an IR op for it may look like."""

    construct: str  # how the source spells it, e.g. "dist.all_reduce"
    line: int  # where it is written
    lines: frozenset[int]  # lines an op for it may cite
    kinds: frozenset[str]  # op kinds it may become
    required: frozenset[str] = frozenset()  # one op of these kinds must cite one of `lines`
    max_ops: int | None = None  # most collective ops it accounts for at `line` (None: unbounded)
    is_async: bool = False
    direct: bool = True  # a call written at `line` (not a reference through a table)


@dataclass(frozen=True)
class ExampleInput:
    param: str | None  # the entry parameter it feeds
    shape: tuple[int, ...] | None  # None when the size expression is not literal
    dtype: str  # "float" | "int" | "bool"


@dataclass
class SourceFacts:
    path: str
    lines: list[str]
    entry: str | None = None
    entry_kind: str | None = None  # function | build | module
    entry_params: list[str] = field(default_factory=list)
    example_inputs: list[ExampleInput] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    identifiers: frozenset[str] = frozenset()
    mesh: tuple[tuple[str, int], ...] | None = None
    returns: int | None = None
    style: str = "explicit"
    syntax_error: str | None = None

    def line_text(self, line: int | None) -> str:
        if line is None or not 1 <= line <= len(self.lines):
            return ""
        return self.lines[line - 1]

    def sites_at(self, line: int) -> list[Site]:
        return [site for site in self.sites if line in site.lines]


# --- helpers ---------------------------------------------------------------------------------

def _imports(tree: ast.Module) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


def _dist_name(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``all_reduce`` when ``node`` names a torch.distributed function (or funcol's)."""
    dotted = _dotted(node, aliases)
    if not dotted or "." not in dotted:
        return None
    prefix, name = dotted.rsplit(".", 1)
    if not (prefix.startswith("torch.distributed") or prefix in ("dist", "funcol")):
        return None
    if name in DIST_COLLECTIVES or name in DIST_OPTIONAL:
        return name
    return None


def _last(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, (ast.Name, ast.Attribute)):
        return [_last(target)]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for item in target.elts for n in _target_names(item)]
    return []


def _constants(tree: ast.Module) -> dict[str, int]:
    env: dict[str, int] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = (list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                 and len(target.elts) == len(value.elts) else [(target, value)])
        for name_node, expr in pairs:
            if isinstance(name_node, ast.Name):
                number = _evaluate(expr, env)
                if isinstance(number, int):
                    env[name_node.id] = number
    return env


def _evaluate(node: ast.AST, env: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _evaluate(node.operand, env)
        return -value if value is not None else None
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        if left is None or right is None:
            return None
        try:
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.FloorDiv):
                return left // right
            if isinstance(node.op, ast.Div):
                return left // right if left % right == 0 else None
            if isinstance(node.op, ast.Mod):
                return left % right
            if isinstance(node.op, ast.Pow):
                return left ** right
        except ZeroDivisionError:
            return None
    return None


def _mentions_rank(node: ast.AST) -> bool:
    return "rank" in ast.unparse(node).lower()


# --- the reader --------------------------------------------------------------------------------

@dataclass
class _Func:
    key: str  # "name" or "Class.name" or "<lambda>@line"
    name: str
    node: ast.AST
    cls: str | None
    parent: str | None  # enclosing function key
    params: list[str]


@dataclass
class _Call:
    node: ast.Call
    func_key: str | None  # enclosing function (None: module level)
    in_loop: bool
    conditional: bool


class _Reader(ast.NodeVisitor):
    """One walk collecting functions, calls (with loop/condition context) and called nodes."""

    def __init__(self) -> None:
        self.funcs: dict[str, _Func] = {}
        self.calls: list[_Call] = []
        self.scopes: list[tuple[str, str]] = []  # ("class", name) | ("func", key)
        self.loops = [0]
        self.conds = [0]
        self.called_nodes: set[int] = set()

    @property
    def current(self) -> str | None:
        return next((key for kind, key in reversed(self.scopes) if kind == "func"), None)

    def _enter(self, node: ast.AST, name: str, params: list[str]) -> None:
        cls = self.scopes[-1][1] if self.scopes and self.scopes[-1][0] == "class" else None
        key = f"<lambda>@{node.lineno}" if isinstance(node, ast.Lambda) else f"{cls}.{name}" if cls else name
        while key in self.funcs:
            key = f"{key}@{node.lineno}"
        self.funcs[key] = _Func(key, name, node, cls, self.current, params)
        self.scopes.append(("func", key))
        self.loops.append(0)
        self.conds.append(0)

    def _leave(self) -> None:
        self.scopes.pop()
        self.loops.pop()
        self.conds.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scopes.append(("class", node.name))
        for item in node.body:
            self.visit(item)
        self.scopes.pop()

    def _function(self, node) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        self._enter(node, node.name, params)
        for item in node.body:
            self.visit(item)
        self._leave()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._enter(node, "<lambda>", [a.arg for a in node.args.args])
        self.visit(node.body)
        self._leave()

    def _loop(self, node) -> None:
        self.loops[-1] += 1
        self.generic_visit(node)
        self.loops[-1] -= 1

    visit_For = visit_AsyncFor = visit_While = visit_ListComp = visit_SetComp = visit_DictComp = \
        visit_GeneratorExp = _loop

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        conditional = not _mentions_rank(node.test)
        self.conds[-1] += conditional
        for item in node.body + node.orelse:
            self.visit(item)
        self.conds[-1] -= conditional

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        conditional = not _mentions_rank(node.test)
        self.conds[-1] += conditional
        self.visit(node.body)
        self.visit(node.orelse)
        self.conds[-1] -= conditional

    def visit_Try(self, node: ast.Try) -> None:
        for item in node.body + node.finalbody:
            self.visit(item)
        self.conds[-1] += 1
        for handler in node.handlers:
            self.visit(handler)
        for item in node.orelse:
            self.visit(item)
        self.conds[-1] -= 1

    def visit_Call(self, node: ast.Call) -> None:
        self.called_nodes.add(id(node.func))
        self.calls.append(_Call(node, self.current, self.loops[-1] > 0, self.conds[-1] > 0))
        self.generic_visit(node)


def _find_entry(tree: ast.Module, entry: str | None) -> tuple[str | None, str | None]:
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if entry:
        if entry in classes:
            return entry, "module"
        if entry in functions:
            return entry, "build" if entry == "build" else "function"
        return entry, None
    if "build" in functions:
        return "build", "build"
    if "forward" in functions:
        return "forward", "function"
    modules = [c for c in classes.values() if any("Module" in ast.unparse(b) for b in c.bases)]
    if modules:
        used = {c.name for c in modules for other in modules if other is not c
                if re.search(rf"\b{c.name}\(", ast.unparse(other))}
        top = [c for c in modules if c.name not in used] or modules
        return top[-1].name, "module"
    candidates = [name for name in functions if name != "example_inputs"]
    if len(candidates) == 1:
        return candidates[0], "function"
    return None, None


def read_source(source: str, path: str, entry: str | None = None) -> SourceFacts:
    """All static facts about ``source``; a file that does not parse yields empty facts."""
    facts = SourceFacts(path=path, lines=source.splitlines())
    facts.style = ("dtensor" if re.search(r"parallelize_module|distribute_tensor|DTensor", source)
                   else "megatron" if "megatron" in source else "explicit")
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        facts.syntax_error = f"line {exc.lineno}: {exc.msg}"
        return facts
    aliases = _imports(tree)
    constants = _constants(tree)
    reader = _Reader()
    reader.visit(tree)
    facts.entry, facts.entry_kind = _find_entry(tree, entry)
    facts.identifiers = _identifiers(tree)
    facts.mesh = _mesh(reader, aliases, constants)
    _entry_signature(facts, reader)
    facts.example_inputs = _example_inputs(tree, constants, facts.entry_params)
    facts.sites = _Sites(tree, reader, aliases, facts).collect()
    return facts


def _identifiers(tree: ast.Module) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(part for part in re.split(r"[^A-Za-z_0-9]+", node.value) if part)
    return frozenset(names)


def _mesh(reader: _Reader, aliases: dict[str, str], constants: dict[str, int]) -> tuple[tuple[str, int], ...] | None:
    for call in reader.calls:
        name = _last(call.node.func)
        keywords = {k.arg: k.value for k in call.node.keywords}
        if name == "init_device_mesh":
            shape_node = call.node.args[1] if len(call.node.args) > 1 else keywords.get("mesh_shape")
            names_node = keywords.get("mesh_dim_names")
            if isinstance(shape_node, (ast.Tuple, ast.List)):
                sizes = [_evaluate(e, constants) for e in shape_node.elts]
                if all(isinstance(s, int) for s in sizes):
                    names = ([e.value for e in names_node.elts if isinstance(e, ast.Constant)]
                             if isinstance(names_node, (ast.Tuple, ast.List)) else [])
                    if len(names) != len(sizes):
                        names = ["tp"] if len(sizes) == 1 else [f"d{i}" for i in range(len(sizes))]
                    return tuple(zip(names, sizes))
        if name == "initialize_model_parallel":
            size_node = keywords.get("tensor_model_parallel_size") or (call.node.args[0] if call.node.args else None)
            size = _evaluate(size_node, constants) if size_node is not None else None
            if isinstance(size, int):
                return (("tp", size),)
    return None


def _returns(node: ast.AST) -> int | None:
    counts = set()
    body = node.body if isinstance(node.body, list) else [ast.Return(node.body)]
    stack = list(body)
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(item, ast.Return) and item.value is not None:
            counts.add(len(item.value.elts) if isinstance(item.value, ast.Tuple) else 1)
        stack.extend(ast.iter_child_nodes(item))
    return counts.pop() if len(counts) == 1 else None


def _entry_signature(facts: SourceFacts, reader: _Reader) -> None:
    if facts.entry is None:
        return
    target: _Func | None = None
    if facts.entry_kind == "module":
        target = reader.funcs.get(f"{facts.entry}.forward")
    elif facts.entry_kind == "build":
        build = reader.funcs.get(facts.entry)
        returned = _returned_function(build, reader) if build else None
        target = returned
    else:
        target = reader.funcs.get(facts.entry)
    if target is None:
        return
    facts.entry_params = [p for p in target.params if p != "self"]
    facts.returns = _returns(target.node)


def _returned_function(build: _Func, reader: _Reader) -> _Func | None:
    for node in ast.walk(build.node):
        if isinstance(node, ast.Return) and node.value is not None:
            if isinstance(node.value, ast.Name):
                for func in reader.funcs.values():
                    if func.parent == build.key and func.name == node.value.id:
                        return func
            if isinstance(node.value, ast.Lambda):
                return next((f for f in reader.funcs.values() if f.node is node.value), None)
    return None


def _example_inputs(tree: ast.Module, constants: dict[str, int], params: list[str]) -> list[ExampleInput]:
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "example_inputs"), None)
    if function is None:
        return []
    returned = next((n.value for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None), None)
    if returned is None:
        return []
    items = returned.elts if isinstance(returned, (ast.Tuple, ast.List)) else [returned]
    out = []
    for index, item in enumerate(items):
        param = params[index] if index < len(params) else None
        out.append(_tensor_spec(item, constants, param))
    return out


def _tensor_spec(node: ast.AST, constants: dict[str, int], param: str | None) -> ExampleInput:
    if not (isinstance(node, ast.Call) and _last(node.func) in _TENSOR_MAKERS):
        return ExampleInput(param, None, "float")
    keywords = {k.arg: k.value for k in node.keywords}
    dtype_text = ast.unparse(keywords["dtype"]) if "dtype" in keywords else ""
    maker = _last(node.func)
    dtype = ("int" if re.search(r"long|int", dtype_text) or (maker == "randint" and not dtype_text)
             else "bool" if "bool" in dtype_text else "float")
    args = list(node.args)
    if maker == "randint":
        args = args[2:3] if len(args) >= 3 else []
    elif maker == "full":
        args = args[:1]
    if "size" in keywords:
        args = [keywords["size"]]
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    sizes = [_evaluate(a, constants) for a in args]
    if maker in ("arange", "tensor") or not all(isinstance(s, int) for s in sizes):
        return ExampleInput(param, None, dtype)
    return ExampleInput(param, tuple(sizes), dtype)


class _Sites:
    """Turns the reader's calls and references into ``Site``s (see the module docstring)."""

    def __init__(self, tree: ast.Module, reader: _Reader, aliases: dict[str, str], facts: SourceFacts):
        self.tree, self.reader, self.aliases, self.facts = tree, reader, aliases, facts
        self.parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        self.memo: dict[str, tuple[int | None, str]] = {}

    # multiplicity and reachability of functions ---------------------------------------------
    def _entry_keys(self) -> set[str]:
        facts = self.facts
        if facts.entry is None:
            return set()
        if facts.entry_kind == "module":
            return {f"{facts.entry}.forward", f"{facts.entry}.__init__"}
        keys = {facts.entry}
        build = self.reader.funcs.get(facts.entry)
        if facts.entry_kind == "build" and build is not None:
            returned = _returned_function(build, self.reader)
            if returned is not None:
                keys.add(returned.key)
        return keys

    def reach(self, key: str | None, seen: frozenset[str] = frozenset()) -> tuple[int | None, str]:
        """(how often the function runs per entry call — None: unknown/many, and
        'always' | 'maybe' | 'never')."""
        if key is None:
            return 1, "always"
        if key in self.memo:
            return self.memo[key]
        if key in seen:
            return None, "maybe"
        func = self.reader.funcs[key]
        if key in self._entry_keys():
            result: tuple[int | None, str] = (1, "always")
        elif getattr(func.node, "decorator_list", None):
            result = (None, "maybe")  # registered somewhere we do not follow
        elif isinstance(func.node, ast.Lambda):
            parent = self.reach(func.parent, seen | {key}) if func.parent else (1, "always")
            result = (None, "maybe" if parent[1] != "never" else "never")
        elif func.cls and func.name in ("forward", "__call__", "backward"):
            # instances are called (or Function.apply'd) any number of times
            result = (None, self._class_uses(func.cls, seen | {key}))
        elif func.cls and func.name == "__init__":
            result = self._calls_of(func.cls, seen | {key})
        else:
            result = self._calls_of(func.name, seen | {key})
            if self._referenced(func):
                result = (None, "maybe" if result[1] == "never" else result[1])
        self.memo[key] = result
        return result

    def _class_uses(self, cls: str, seen: frozenset[str]) -> str:
        """How surely a class is put to use: instantiated, or its autograd ``apply`` called."""
        reaches = [self._calls_of(cls, seen)[1], self._calls_of("apply", seen, owner=cls)[1]]
        return "always" if "always" in reaches else "maybe" if "maybe" in reaches else "never"

    def _calls_of(self, name: str, seen: frozenset[str], owner: str | None = None) -> tuple[int | None, str]:
        total: int | None = 0
        best = "never"
        for call in self.reader.calls:
            if _last(call.node.func) != name:
                continue
            if owner is not None and not (isinstance(call.node.func, ast.Attribute)
                                          and _last(call.node.func.value) == owner):
                continue
            count, reach = self.reach(call.func_key, seen)
            if reach == "never":
                continue
            reach = "maybe" if call.conditional else reach
            best = "always" if "always" in (best, reach) else "maybe"
            total = None if total is None or count is None or call.in_loop else total + count
        return total, best

    def _referenced(self, func: _Func) -> bool:
        """Whether the function escapes as a value (a table entry, an argument)."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and _last(node) == func.name \
                    and id(node) not in self.reader.called_nodes:
                if isinstance(node, ast.Name) and isinstance(self.parents.get(id(node)), ast.Return):
                    continue
                if isinstance(self.parents.get(id(node)), (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                return True
        return False

    # sites ------------------------------------------------------------------------------------
    def collect(self) -> list[Site]:
        carriers = self._carriers()
        dispatch = self._dispatch_lines(carriers)
        sites: list[Site] = []
        for call in self.reader.calls:
            site = self._site(call, dispatch)
            if site is not None:
                sites.append(site)
        for line, kinds in dispatch.items():
            sites.append(Site("a call through a table of collectives", line, frozenset({line}), frozenset(kinds),
                              direct=False))
        for node, name in self._references():
            kinds = DIST_COLLECTIVES.get(name) or DIST_OPTIONAL.get(name, ())
            sites.append(Site(f"dist.{name} (referenced)", node.lineno, frozenset({node.lineno}), frozenset(kinds),
                              direct=False))
        return sites

    def _references(self) -> list[tuple[ast.AST, str]]:
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in self.reader.called_nodes:
                name = _dist_name(node, self.aliases)
                if name and not isinstance(self.parents.get(id(node)), ast.Attribute):
                    found.append((node, name))
        return found

    def _function_kinds(self) -> dict[str, set[str]]:
        """User functions -> collective kinds their bodies perform (transitively)."""
        kinds: dict[str, set[str]] = {}
        for call in self.reader.calls:
            name = _dist_name(call.node.func, self.aliases)
            if name in DIST_COLLECTIVES and call.func_key:
                kinds.setdefault(self.reader.funcs[call.func_key].name, set()).update(DIST_COLLECTIVES[name])
        changed = True
        while changed:
            changed = False
            for call in self.reader.calls:
                callee = _last(call.node.func)
                if call.func_key and callee in kinds:
                    owner = self.reader.funcs[call.func_key].name
                    before = len(kinds.setdefault(owner, set()))
                    kinds[owner] |= kinds[callee]
                    changed |= len(kinds[owner]) != before
        return kinds

    def _carriers(self) -> dict[str, set[str]]:
        """Names (variables, attributes, table names) bound to something holding collectives."""
        function_kinds = self._function_kinds()
        carriers: dict[str, set[str]] = {}

        def value_kinds(value: ast.AST) -> set[str]:
            found: set[str] = set()
            for node in ast.walk(value):
                if id(node) in self.reader.called_nodes:
                    continue
                name = _dist_name(node, self.aliases)
                if name in DIST_COLLECTIVES:
                    found.update(DIST_COLLECTIVES[name])
                elif isinstance(node, ast.Name) and node.id in function_kinds:
                    found.update(function_kinds[node.id])
                elif isinstance(node, (ast.Name, ast.Attribute)) and _last(node) in carriers:
                    found.update(carriers[_last(node)])
                elif isinstance(node, ast.Lambda):
                    for inner in ast.walk(node.body):
                        if isinstance(inner, ast.Call):
                            inner_name = _dist_name(inner.func, self.aliases)
                            if inner_name in DIST_COLLECTIVES:
                                found.update(DIST_COLLECTIVES[inner_name])
            return found

        changed = True
        while changed:
            changed = False
            for node in ast.walk(self.tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    kinds = value_kinds(node.value)
                    if not kinds:
                        continue
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        for name in _target_names(target):
                            if name and not kinds <= carriers.get(name, set()):
                                carriers.setdefault(name, set()).update(kinds)
                                changed = True
        return carriers

    def _dispatch_lines(self, carriers: dict[str, set[str]]) -> dict[int, set[str]]:
        uncalled = {k for node, name in self._references() for k in DIST_COLLECTIVES.get(name, ())}
        lines: dict[int, set[str]] = {}
        for call in self.reader.calls:
            func = call.node.func
            kinds: set[str] = set()
            base = func
            while isinstance(base, ast.Subscript):
                base = base.value
            name = _last(base)
            if _dist_name(func, self.aliases):
                continue
            if name in carriers:
                kinds = carriers[name]
            elif isinstance(func, ast.Subscript) or (
                    isinstance(func, ast.Name) and call.func_key and func.id in self.reader.funcs[call.func_key].params):
                kinds = uncalled
            if kinds:
                lines.setdefault(call.node.lineno, set()).update(kinds)
        return lines

    def _site(self, call: _Call, dispatch: dict[int, set[str]]) -> Site | None:
        node, line = call.node, call.node.lineno
        count, reach = self.reach(call.func_key)
        if call.conditional and reach == "always":
            reach = "maybe"
        # Unreached code still may not be cited for more than it does, but is never required
        # (a use we do not follow — a hook, a registry — is not proof that it is dead).
        max_ops = None if reach == "never" or count is None or call.in_loop else max(count, 1)
        name = _dist_name(node.func, self.aliases)
        callee = _last(node.func)
        spelled = ast.unparse(node.func)
        if name in DIST_COLLECTIVES:
            kinds = frozenset(DIST_COLLECTIVES[name])
            is_async = name in ("isend", "irecv") or any(
                k.arg == "async_op" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords)
            lines = {line}
            if call.func_key and self._referenced(self.reader.funcs[call.func_key]):
                lines |= {d for d, dkinds in dispatch.items() if dkinds & kinds}
            return Site(spelled, line, frozenset(lines), kinds, kinds if reach == "always" else frozenset(),
                        max_ops, is_async)
        if name in DIST_OPTIONAL:
            return Site(spelled, line, frozenset({line}), frozenset(DIST_OPTIONAL[name]), frozenset(), None,
                        name == "batch_isend_irecv")
        if callee in MEGATRON_MAPPINGS:
            kinds, required = MEGATRON_MAPPINGS[callee]
            return Site(spelled, line, frozenset({line}), frozenset(kinds),
                        frozenset(required) if reach == "always" else frozenset(), max_ops)
        if callee in MEGATRON_LAYERS or callee in DTENSOR_STYLES:
            kinds, required = MEGATRON_LAYERS.get(callee) or DTENSOR_STYLES[callee]
            lines = {line} | self._use_lines(node)
            return Site(spelled, line, frozenset(lines), frozenset(kinds),
                        frozenset(required) if reach != "never" else frozenset(), None)
        if callee in DTENSOR_CALLS and (callee not in ("full_tensor", "redistribute", "to_local")
                                        or isinstance(node.func, ast.Attribute)):
            return Site(spelled, line, frozenset({line}), frozenset(DTENSOR_CALLS[callee]), frozenset(), None)
        return None

    def _use_lines(self, node: ast.Call) -> set[int]:
        """Where a layer object or a plan entry is used: calls of the attribute it names."""
        parent = self.parents.get(id(node))
        names: list[str] = []
        if isinstance(parent, ast.Assign):
            names = [n for t in parent.targets for n in _target_names(t)]
        elif isinstance(parent, ast.Dict):
            for key, value in zip(parent.keys, parent.values):
                if value is node and isinstance(key, ast.Constant) and isinstance(key.value, str):
                    names = [key.value.split(".")[-1]]
        lines: set[int] = set()
        for name in names:
            lines |= {call.node.lineno for call in self.reader.calls
                      if isinstance(call.node.func, (ast.Attribute, ast.Name)) and _last(call.node.func) == name}
        return lines
