"""Distributed constructs in a source file ("sites") and what IR ops may stand for them.

A site is a ``dist.*`` collective, a Megatron mapping or parallel layer, a DTensor plan entry
or DTensor call, or a call through a table that holds collectives.  For each: the lines an IR
op for it may cite, the op kinds it may become, whether one op is *required* (it runs
unconditionally on the entry's path) and how many collective ops its line can account for
(a helper called twice accounts for two; loops, tables and instance calls: unbounded).
Where static reading cannot decide, a site *allows* an op without *requiring* one — the
execution triage (``agent/triage.py``) covers what this leaves open.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .pywalk import CallSite, Func, Reader, dotted, last_name, returned_function, target_names

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
    "distribute_tensor": ("local_chunk", "broadcast", "identity"),
    "full_tensor": ("all_gather", "all_reduce", "identity"),
    "redistribute": _REDIST, "from_local": ("identity",), "to_local": ("identity",),
    "loss_parallel": ("vocab_parallel_cross_entropy", "all_reduce", "cross_entropy"),
    "parallelize_module": (), "distribute_module": _REDIST,
}


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


def collect_sites(tree: ast.Module, reader: Reader, aliases: dict[str, str], entry: str | None,
                  entry_kind: str | None) -> list[Site]:
    """Every distributed construct of the file, seen from the entry ``entry`` (its kind:
    function | build | module) — which code runs once, maybe, or many times."""
    return SiteCollector(tree, reader, aliases, entry, entry_kind).collect()


def _dist_name(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``all_reduce`` when ``node`` names a torch.distributed function (or funcol's)."""
    spelled = dotted(node, aliases)
    if not spelled or "." not in spelled:
        return None
    prefix, name = spelled.rsplit(".", 1)
    if not (prefix.startswith("torch.distributed") or prefix in ("dist", "funcol")):
        return None
    if name in DIST_COLLECTIVES or name in DIST_OPTIONAL:
        return name
    return None


class SiteCollector:
    """Turns the reader's calls and references into ``Site``s (see the module docstring)."""

    def __init__(self, tree: ast.Module, reader: Reader, aliases: dict[str, str], entry: str | None,
                 entry_kind: str | None):
        self.tree, self.reader, self.aliases = tree, reader, aliases
        self.entry, self.entry_kind = entry, entry_kind
        self.parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        self.memo: dict[str, tuple[int | None, str]] = {}

    # multiplicity and reachability of functions ---------------------------------------------
    def _entry_keys(self) -> set[str]:
        if self.entry is None:
            return set()
        if self.entry_kind == "module":
            return {f"{self.entry}.forward", f"{self.entry}.__init__"}
        keys = {self.entry}
        build = self.reader.funcs.get(self.entry)
        if self.entry_kind == "build" and build is not None:
            returned = returned_function(build, self.reader)
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
            if last_name(call.node.func) != name:
                continue
            if owner is not None and not (isinstance(call.node.func, ast.Attribute)
                                          and last_name(call.node.func.value) == owner):
                continue
            count, reach = self.reach(call.func_key, seen)
            if reach == "never":
                continue
            reach = "maybe" if call.conditional else reach
            best = "always" if "always" in (best, reach) else "maybe"
            total = None if total is None or count is None or call.in_loop else total + count
        return total, best

    def _referenced(self, func: Func) -> bool:
        """Whether the function escapes as a value (a table entry, an argument)."""
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and last_name(node) == func.name \
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
                callee = last_name(call.node.func)
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
                elif isinstance(node, (ast.Name, ast.Attribute)) and last_name(node) in carriers:
                    found.update(carriers[last_name(node)])
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
                        for name in target_names(target):
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
            name = last_name(base)
            if _dist_name(func, self.aliases):
                continue
            if name in carriers:
                kinds = carriers[name]
            elif isinstance(func, ast.Subscript) or (isinstance(func, ast.Name) and call.func_key
                                                      and func.id in self.reader.funcs[call.func_key].params):
                kinds = uncalled
            if kinds:
                lines.setdefault(call.node.lineno, set()).update(kinds)
        return lines

    def _site(self, call: CallSite, dispatch: dict[int, set[str]]) -> Site | None:
        node, line = call.node, call.node.lineno
        count, reach = self.reach(call.func_key)
        if call.conditional and reach == "always":
            reach = "maybe"
        # Unreached code still may not be cited for more than it does, but is never required
        # (a use we do not follow — a hook, a registry — is not proof that it is dead).
        max_ops = None if reach == "never" or count is None or call.in_loop else max(count, 1)
        name = _dist_name(node.func, self.aliases)
        callee = last_name(node.func)
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
            names = [n for t in parent.targets for n in target_names(t)]
        elif isinstance(parent, ast.Dict):
            for key, value in zip(parent.keys, parent.values):
                if value is node and isinstance(key, ast.Constant) and isinstance(key.value, str):
                    names = [key.value.split(".")[-1]]
        lines: set[int] = set()
        for name in names:
            lines |= {call.node.lineno for call in self.reader.calls
                      if isinstance(call.node.func, (ast.Attribute, ast.Name)) and last_name(call.node.func) == name}
        return lines
