"""Mutants of an installed library's own source (megatron-core, fairscale, yunchang), run through
small drivers that call it.

The installed package is never edited: each mutant is a temporary copy of the package (a tree of
links to the installed files, the one mutated file written out) put first on the import path of
the tool's run (``--path``, the driver placed in it) and of the ground-truth ranks.  Only sites inside the functions
and classes the drivers exercise are mutated (a mutant of code nobody calls says nothing).
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from .operators import mutants_of

DRIVERS = Path(__file__).resolve().parents[2] / "examples" / "realcode_drivers"


@dataclass(frozen=True)
class Target:
    file: str                     # path inside the installed packages, e.g. megatron/core/tensor_parallel/mappings.py
    scopes: frozenset[str]        # top-level functions / classes whose sites are mutated
    drivers: tuple[str, ...]      # driver files (in examples/realcode_drivers/) that exercise them


TARGETS = (
    Target("megatron/core/tensor_parallel/mappings.py",
           frozenset({"_reduce", "_split_along_first_dim", "_gather_along_first_dim", "_reduce_scatter_along_first_dim",
                      "_CopyToModelParallelRegion", "_ReduceFromModelParallelRegion",
                      "_ScatterToSequenceParallelRegion", "_GatherFromSequenceParallelRegion",
                      "_ReduceScatterToSequenceParallelRegion"}),
           ("megatron_mappings_mlp.py", "megatron_sequence_parallel_mlp.py")),
    Target("megatron/core/tensor_parallel/layers.py",
           frozenset({"LinearWithGradAccumulationAndAsyncCommunication", "_initialize_affine_weight_cpu"}),
           ("megatron_tp_mlp.py", "megatron_swiglu_mlp.py")),
    Target("fairscale/nn/model_parallel/mappings.py",
           frozenset({"_reduce", "_split", "_gather", "_CopyToModelParallelRegion", "_ReduceFromModelParallelRegion",
                      "_ScatterToModelParallelRegion", "_GatherFromModelParallelRegion"}),
           ("fairscale_mappings_mlp.py", "fairscale_tp_mlp.py")),
    Target("fairscale/nn/model_parallel/layers.py",
           frozenset({"ColumnParallelLinear", "RowParallelLinear", "_initialize_affine_weight"}),
           ("fairscale_tp_mlp.py",)),
    Target("yunchang/comm/all_to_all.py", frozenset({"all_to_all_4D", "SeqAllToAll4D"}),
           ("yunchang_ulysses_attention.py",)),
)


@dataclass(frozen=True)
class LibraryMutant:
    """One mutant of a library file, run through one driver.  Quacks like ``operators.Mutant``."""
    origin: str          # "<library file> via <driver>"
    operator: str
    line: int            # line of the mutated site in the library file
    description: str
    source: str          # the mutated library file
    file: str            # Target.file
    driver: Path
    original: str        # the library file as installed

    @property
    def digest(self) -> str:
        return hashlib.sha256((self.driver.read_text() + "\0" + self.file + "\0" + self.source).encode()).hexdigest()[:16]

    @property
    def top(self) -> str:
        return self.file.split("/")[0]


def installed_root(top: str) -> Path | None:
    """The folder that holds the installed package ``top`` (found without importing it)."""
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).parent


def _in_scope(tree: ast.Module, scopes: frozenset[str]) -> list[tuple[int, int]]:
    return [(node.lineno, node.end_lineno) for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in scopes]


def library_mutants(operators: list[str] | None = None) -> list[LibraryMutant]:
    found = []
    for target in TARGETS:
        root = installed_root(target.file.split("/")[0])
        if root is None or not (root / target.file).is_file():
            continue
        text = (root / target.file).read_text()
        spans = _in_scope(ast.parse(text), target.scopes)
        for m in mutants_of(target.file, text, operators):
            if not any(lo <= m.line <= hi for lo, hi in spans):
                continue
            for driver in target.drivers:
                found.append(LibraryMutant(f"{target.file} via {driver}", m.operator, m.line, m.description,
                                           m.source, target.file, DRIVERS / driver, text))
    return found


def write_library_mutant(folder: Path, mutant: LibraryMutant) -> tuple[Path, Path]:
    """The driver's copy and the import root holding the package copy with the mutated file."""
    where = folder / mutant.digest
    lib = where / "lib"
    _link_around(installed_root(mutant.top), lib, mutant.file)
    (lib / mutant.file).write_text(mutant.source)
    # the driver sits in the import root: the tool runs it with ``--path lib`` (its traced child and
    # gloo confirmation import from there, not from this process's path)
    driver = lib / mutant.driver.name
    driver.write_text(mutant.driver.read_text())
    return driver, lib


def _link_around(root: Path, dest: Path, file: str) -> None:
    """``dest`` mirrors ``root`` along the folders leading to ``file``: every other entry on the way is
    a link to the installed one (a few dozen links, not a copy of the package)."""
    parts = Path(file).parts
    for depth in range(len(parts)):
        here = Path(*parts[:depth]) if depth else Path()
        (dest / here).mkdir(parents=True, exist_ok=True)
        if depth == 0:
            os.symlink(root / parts[0], dest / parts[0]) if len(parts) == 1 else None
            continue
        for entry in (root / here).iterdir():
            if entry.name in (parts[depth], "__pycache__"):
                continue
            os.symlink(entry, dest / here / entry.name)
