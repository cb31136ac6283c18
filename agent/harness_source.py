"""A harness as the model wrote it: the Python code of its answer, and what it may not do, read without
running it.

The checks here are a first filter with reasons the model (and the user) can read; what holds the
harness to building arguments is ``frontends/traced/harness_guard.py`` in the child, which looks at
the objects themselves.  Nothing here imports, evaluates or runs the answer.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
# modules whose use lets code reach past building arguments: the interpreter's own machinery
# (sys.modules, builtins, frames, code objects), mocking, processes and files, and this tool's packages
_FORBIDDEN_MODULES = frozenset({"sys", "builtins", "importlib", "ctypes", "gc", "types", "inspect", "os",
                                "subprocess", "socket", "pickle", "marshal", "runpy", "code", "codeop",
                                "unittest", "shutil", "pathlib", "threading", "multiprocessing", "signal",
                                "frontends", "verifier", "agent", "verify_agent", "tir_lifter"})
_FORBIDDEN_NAMES = frozenset({"exec", "eval", "compile", "__import__", "setattr", "delattr", "globals", "locals",
                              "vars", "open", "breakpoint", "__builtins__", "input"})
_ALLOWED_DUNDERS = frozenset({"__init__", "__name__"})


@dataclass(frozen=True)
class HarnessCode:
    """``code``: the harness's Python text; ``malformed``/``refused``: why it cannot be run (one sentence)."""

    code: str | None
    malformed: str | None = None
    refused: str | None = None


def read_answer(text: str) -> HarnessCode:
    """The harness in a model's answer: its first ```python block, else the whole answer."""
    blocks = _BLOCK.findall(text or "")
    code = (blocks[0] if blocks else text or "").strip("\n")
    if not code.strip():
        return HarnessCode(None, malformed="the answer holds no Python code")
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        return HarnessCode(None, malformed=f"the harness does not parse: {error.msg} (line {error.lineno})")
    harness = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "harness"]
    if not harness:
        return HarnessCode(None, malformed="the answer defines no top-level function harness(module, world)")
    refused = _refusal(tree)
    return HarnessCode(code + "\n", refused=refused)


def _refusal(tree: ast.Module) -> str | None:
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in _FORBIDDEN_MODULES:
                    return _at(node, f"imports {alias.name}")
                imported.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] in _FORBIDDEN_MODULES:
                return _at(node, f"imports from {'.' * node.level}{node.module or ''}")
            imported |= {alias.asname or alias.name for alias in node.names}
    harness = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "harness")
    patchable = imported | {arg.arg for arg in harness.args.args[:1]}   # the modules, and the user's module
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _FORBIDDEN_NAMES:
            return _at(node, f"uses {node.id}")
        if isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr not in _ALLOWED_DUNDERS:
            return _at(node, f"reaches into {node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2:
            name = node.args[1]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)) or name.value.startswith("__"):
                return _at(node, "calls getattr with a name that is not a plain constant")
        for target in _targets(node):
            root = _root(target)
            if isinstance(target, (ast.Attribute, ast.Subscript)) and root in patchable:
                return _at(node, f"assigns to {ast.unparse(target)}, changing a module's code or state")
    return None


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return [element for target in node.targets for element in _flat(target)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return _flat(node.target)
    if isinstance(node, ast.Delete):
        return [element for target in node.targets for element in _flat(target)]
    return []


def _flat(target: ast.AST) -> list[ast.AST]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [element for item in target.elts for element in _flat(item)]
    return [target]


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _at(node: ast.AST, what: str) -> str:
    return f"the harness {what} (its line {getattr(node, 'lineno', '?')}): a harness only builds the entry and " \
           f"its inputs"
