"""What the user's file says, read statically with ``ast``: the facts a translation must respect.

The LLM path is only trustworthy if its IR can be held against the source without trusting
the model.  This module extracts, once per file:

* *sites*: every distributed construct and what IR ops may stand for it (``sites.py``);
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

from .pywalk import Func, Reader, evaluate_int, imports, last_name, module_constants, returned_function
from .sites import Site, collect_sites

_TENSOR_MAKERS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "arange", "tensor"}

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
    from frontends.nesting import nesting_problem

    too_deep = nesting_problem(source)
    if too_deep is not None:
        facts.syntax_error = f"line {too_deep[0]}: {too_deep[1]}"
        return facts
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, RecursionError, MemoryError) as exc:
        facts.syntax_error = (f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError)
                              else "the file nests too deeply to read")
        return facts
    aliases = imports(tree)
    constants = module_constants(tree)
    reader = Reader()
    reader.visit(tree)
    facts.entry, facts.entry_kind = _find_entry(tree, entry)
    facts.identifiers = _identifiers(tree)
    facts.mesh = _mesh(reader, aliases, constants)
    _entry_signature(facts, reader)
    facts.example_inputs = _example_inputs(tree, constants, facts.entry_params)
    facts.sites = collect_sites(tree, reader, aliases, facts.entry, facts.entry_kind)
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


def _mesh(reader: Reader, aliases: dict[str, str], constants: dict[str, int]) -> tuple[tuple[str, int], ...] | None:
    for call in reader.calls:
        name = last_name(call.node.func)
        keywords = {k.arg: k.value for k in call.node.keywords}
        if name == "init_device_mesh":
            shape_node = call.node.args[1] if len(call.node.args) > 1 else keywords.get("mesh_shape")
            names_node = keywords.get("mesh_dim_names")
            if isinstance(shape_node, (ast.Tuple, ast.List)):
                sizes = [evaluate_int(e, constants) for e in shape_node.elts]
                if all(isinstance(s, int) for s in sizes):
                    names = ([e.value for e in names_node.elts if isinstance(e, ast.Constant)]
                             if isinstance(names_node, (ast.Tuple, ast.List)) else [])
                    if len(names) != len(sizes):
                        names = ["tp"] if len(sizes) == 1 else [f"d{i}" for i in range(len(sizes))]
                    return tuple(zip(names, sizes))
        if name == "initialize_model_parallel":
            size_node = keywords.get("tensor_model_parallel_size") or (call.node.args[0] if call.node.args else None)
            size = evaluate_int(size_node, constants) if size_node is not None else None
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


def _entry_signature(facts: SourceFacts, reader: Reader) -> None:
    if facts.entry is None:
        return
    target: Func | None = None
    if facts.entry_kind == "module":
        target = reader.funcs.get(f"{facts.entry}.forward")
    elif facts.entry_kind == "build":
        build = reader.funcs.get(facts.entry)
        returned = returned_function(build, reader) if build else None
        target = returned
    else:
        target = reader.funcs.get(facts.entry)
    if target is None:
        return
    facts.entry_params = [p for p in target.params if p != "self"]
    facts.returns = _returns(target.node)


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
    if not (isinstance(node, ast.Call) and last_name(node.func) in _TENSOR_MAKERS):
        return ExampleInput(param, None, "float")
    keywords = {k.arg: k.value for k in node.keywords}
    dtype_text = ast.unparse(keywords["dtype"]) if "dtype" in keywords else ""
    maker = last_name(node.func)
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
    sizes = [evaluate_int(a, constants) for a in args]
    if maker in ("arange", "tensor") or not all(isinstance(s, int) for s in sizes):
        return ExampleInput(param, None, dtype)
    return ExampleInput(param, tuple(sizes), dtype)


