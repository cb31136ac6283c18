"""Reading a source file: libcst tree, line numbers, imports, top-level definitions.

Library names are resolved through the file's imports to their import path
(``dist.all_reduce`` -> ``torch.distributed.all_reduce``) and then to a canonical name
that does not depend on which submodule the user imported from
(``torch.distributed.tensor.parallel.style.ColwiseParallel`` -> ``dtensor.ColwiseParallel``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from .values import UserError


@dataclass
class SourceFile:
    path: str
    text: str
    module: cst.Module
    positions: dict
    imports: dict[str, str] = field(default_factory=dict)  # local name -> import path
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)
    classes: dict[str, cst.ClassDef] = field(default_factory=dict)
    assignments: dict[str, tuple[cst.BaseExpression, int, int | None]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # top-level definitions in source order
    imported_modules: list[str] = field(default_factory=list)

    def line(self, node: cst.CSTNode) -> int | None:
        position = self.positions.get(node)
        return position.start.line if position is not None else None

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def import_paths(self) -> set[str]:
        return set(self.imports.values()) | set(self.imported_modules)


def parse(text: str, path: str) -> SourceFile:
    from .nesting import nesting_problem

    too_deep = nesting_problem(text)
    if too_deep is not None:
        raise UserError(*too_deep)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise UserError(error.raw_line, f"syntax error: {error.message}") from None
    wrapper = MetadataWrapper(module)
    positions = dict(wrapper.resolve(PositionProvider))  # a dict: rewritten nodes get their original line
    source = SourceFile(path, text, wrapper.module, positions)
    for statement in source.module.body:
        _read_top_level(source, statement)
    return source


def _read_top_level(source: SourceFile, statement: cst.CSTNode) -> None:
    if isinstance(statement, cst.FunctionDef):
        source.functions[statement.name.value] = statement
        source.order.append(statement.name.value)
    elif isinstance(statement, cst.ClassDef):
        source.classes[statement.name.value] = statement
        source.order.append(statement.name.value)
    elif isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)):
                read_import(small, source.imports, source.imported_modules)
            elif isinstance(small, cst.Assign):
                for target in small.targets:
                    _record_assignment(source, target.target, small.value, None)
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                _record_assignment(source, small.target, small.value, None)
    elif isinstance(statement, cst.If):
        # ``if TYPE_CHECKING:`` / ``try: import ...``-style blocks: read imports only
        for inner in statement.body.body:
            if isinstance(inner, cst.SimpleStatementLine):
                for small in inner.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        read_import(small, source.imports, source.imported_modules)
    elif isinstance(statement, cst.Try):
        for inner in statement.body.body:
            if isinstance(inner, cst.SimpleStatementLine):
                for small in inner.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        read_import(small, source.imports, source.imported_modules)


def _record_assignment(source: SourceFile, target: cst.BaseExpression, value: cst.BaseExpression,
                       index: int | None) -> None:
    line = source.line(target)
    if isinstance(target, cst.Name):
        source.assignments[target.value] = (value, line, index)
    elif isinstance(target, (cst.Tuple, cst.List)):
        if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
            for element, item in zip(target.elements, value.elements):
                _record_assignment(source, element.value, item.value, None)
        else:
            for i, element in enumerate(target.elements):
                if isinstance(element.value, cst.Name):
                    source.assignments[element.value.value] = (value, line, i)


def dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def read_import(node: cst.Import | cst.ImportFrom, imports: dict[str, str], modules: list[str]) -> None:
    if isinstance(node, cst.Import):
        for alias in node.names:
            path = dotted(alias.name)
            if path is None:
                continue
            modules.append(path)
            if alias.asname is not None:
                imports[alias.asname.name.value] = path
            else:
                head = path.split(".")[0]
                imports[head] = head
        return
    if node.relative:
        return
    base = dotted(node.module) if node.module is not None else None
    if base is None:
        return
    modules.append(base)
    if isinstance(node.names, cst.ImportStar):
        imports[f"*{base}"] = base
        return
    for alias in node.names:
        name = dotted(alias.name)
        local = alias.asname.name.value if alias.asname is not None else name
        imports[local] = f"{base}.{name}"


# --- canonical library names ------------------------------------------------------------------

_DTENSOR_PREFIXES = ("torch.distributed.tensor", "torch.distributed._tensor")
_RENAMES = {
    "torch.nn.functional": "F",
    "torch.distributed.distributed_c10d": "torch.distributed",
    "torch.distributed.device_mesh": "torch.distributed",
    "torch.nn.modules.linear": "torch.nn",
    "torch.nn.modules.normalization": "torch.nn",
    "torch.nn.modules.sparse": "torch.nn",
    "torch.nn.modules.activation": "torch.nn",
    "torch.nn.modules.container": "torch.nn",
    "torch.nn.modules.module": "torch.nn",
    "torch.nn.parameter": "torch.nn",
    "torch.distributed._functional_collectives": "funcol",
}


def canonical(path: str) -> str:
    """``torch.distributed.all_reduce`` -> ``dist.all_reduce``, ``torch.nn.Linear`` -> ``nn.Linear``..."""
    for prefix in _DTENSOR_PREFIXES:
        if path == prefix or path.startswith(prefix + "."):
            rest = path[len(prefix) + 1:]
            return "dtensor." + rest.split(".")[-1] if rest else "dtensor"
    if path.startswith("megatron.core") or path.startswith("megatron."):
        last = path.split(".")[-1]
        if path.startswith("megatron.core.tensor_parallel") or path.startswith("megatron.core.parallel_state") \
                or last in ("TransformerConfig", "ModelParallelConfig"):
            return "megatron." + last
        return "megatron." + path.split("megatron.", 1)[1]
    for old, new in _RENAMES.items():
        if path == old or path.startswith(old + "."):
            path = new + path[len(old):]
            break
    if path.startswith("torch.distributed.nn.functional."):
        return "dist.nn." + path.rsplit(".", 1)[1]
    if path.startswith("torch.distributed."):
        return "dist." + path[len("torch.distributed."):]
    if path == "torch.distributed":
        return "dist"
    if path.startswith("torch.nn.") and not path.startswith("torch.nn.functional"):
        return "nn." + path[len("torch.nn."):]
    return path


def library_name(source: SourceFile, func: cst.BaseExpression) -> str | None:
    """The canonical library path a called name refers to through the file's imports, if any."""
    name = dotted(func)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    path = source.imports.get(head)
    if path is None:
        return None
    return canonical(f"{path}.{rest}" if rest else path)


def uses_distributed(source: SourceFile, node: cst.CSTNode) -> bool:
    """Does ``node`` mention a distributed construct (through the file's imports)?"""
    for name in m.findall(node, m.Name()):
        path = source.imports.get(name.value)
        if path and (path.startswith("torch.distributed") or path.startswith("megatron")):
            return True
        if name.value in ("parallelize_module", "DTensor", "distribute_tensor", "dist"):
            return True
    return False


def style_of(source: SourceFile) -> str:
    paths = source.import_paths()
    if any(p.startswith("megatron.core") or p == "megatron" for p in paths):
        return "megatron"
    if any(p.startswith(_DTENSOR_PREFIXES) for p in paths) or "parallelize_module" in source.text:
        return "dtensor"
    return "explicit"


__all__ = ["SourceFile", "parse", "canonical", "dotted", "read_import", "uses_distributed", "style_of", "UserError"]
