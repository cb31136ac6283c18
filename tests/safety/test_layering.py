"""Data flows one way (DESIGN.md): a layer never imports a package above it.

Every import statement is read with ``ast`` (module level and inside functions, relative
imports resolved), so a lazy ``from verify_agent.pipeline import ...`` inside a function
counts the same as one at the top of the file.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = {
    "verifier": {"frontends", "agent", "verify_agent", "tir_lifter"},
    "frontends": {"agent", "verify_agent"},
}


def imported_packages(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, top-level package) of every import in ``path``, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module_parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if module_parts[-1] == "__init__":
        module_parts = module_parts[:-1]
        here = module_parts
    else:
        here = module_parts[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                top = base[0] if base else (node.module or "").split(".")[0]
            else:
                top = (node.module or "").split(".")[0]
            found.append((node.lineno, top))
    return found


def violations(layer: str) -> list[str]:
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for line, top in imported_packages(path, layer):
            if top in FORBIDDEN[layer]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {top}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_nothing_above_it(layer):
    assert violations(layer) == []


def test_scanner_sees_a_lazy_upward_import(tmp_path):
    """The scan itself can fail: an upward import inside a function is reported."""
    fake_root = tmp_path
    (fake_root / "verifier" / "sub").mkdir(parents=True)
    (fake_root / "verifier" / "sub" / "mod.py").write_text(
        "def f():\n    from verify_agent.pipeline import TranslateOptions\n    from ..check import x\n")
    global ROOT
    saved, ROOT = ROOT, fake_root
    try:
        assert violations("verifier") == ["verifier/sub/mod.py:2 imports verify_agent"]
    finally:
        ROOT = saved


def test_repair_lives_in_the_application_layer():
    from verify_agent.repair import source_fixes
    from verify_agent.repair.review import run_review

    assert source_fixes.__module__ == "verify_agent.repair.fixes"
    assert run_review.__module__ == "verify_agent.repair.review"
    assert not (ROOT / "verifier" / "synthesis" / "fixes.py").exists()
