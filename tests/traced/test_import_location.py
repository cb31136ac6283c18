"""Where a file is imported from (frontends/traced/location.py): a file inside a package runs as
``package.module`` from the package's import root; a script runs from its own directory.

Pure path logic: no torch, nothing imported from the files (they are written but never run here).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from frontends.traced.location import locate, looks_like_module_name, module_file


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def test_a_file_inside_a_package_is_its_dotted_module_from_above_the_outermost_init(tmp_path):
    _write(tmp_path, {"repo/pkg/__init__.py": "", "repo/pkg/parallel/__init__.py": "",
                      "repo/pkg/parallel/layers.py": "from ..mpu import x\n"})
    where = locate(tmp_path / "repo/pkg/parallel/layers.py", search=[])
    assert (where.root, where.module, where.installed) == (str(tmp_path / "repo"), "pkg.parallel.layers", False)


def test_a_script_without_init_beside_it_is_imported_from_its_own_directory(tmp_path):
    _write(tmp_path, {"scripts/train.py": "import torch\n"})
    where = locate(tmp_path / "scripts/train.py", search=[])
    assert (where.root, where.module) == (str(tmp_path / "scripts"), None)


def test_a_namespace_package_top_is_found_from_the_project_file(tmp_path):
    # megatron/ has no __init__.py (a namespace package), as in a Megatron-LM checkout
    _write(tmp_path, {"proj/pyproject.toml": "[project]\nname = 'x'\n",
                      "proj/megatron/core/__init__.py": "", "proj/megatron/core/mlp.py": ""})
    where = locate(tmp_path / "proj/megatron/core/mlp.py", search=[])
    assert (where.root, where.module) == (str(tmp_path / "proj"), "megatron.core.mlp")


@pytest.mark.parametrize("config, text", [
    ("pyproject.toml", "[tool.setuptools.package-dir]\n'' = 'src'\n"),
    ("pyproject.toml", "[tool.setuptools.packages.find]\nwhere = ['src']\n"),
    ("setup.cfg", "[options]\npackage_dir =\n    =src\n"),
])
def test_a_src_layout_declared_by_the_project_is_the_import_root(tmp_path, config, text):
    _write(tmp_path, {f"proj/{config}": text, "proj/src/ns/tp/__init__.py": "", "proj/src/ns/tp/maps.py": ""})
    where = locate(tmp_path / "proj/src/ns/tp/maps.py", search=[])
    assert (where.root, where.module) == (str(tmp_path / "proj/src"), "ns.tp.maps")


def test_path_option_names_the_root_of_a_flat_layout(tmp_path):
    _write(tmp_path, {"work/lib/tp/maps.py": ""})   # no __init__.py anywhere
    where = locate(tmp_path / "work/lib/tp/maps.py", paths=(str(tmp_path / "work/lib"),), search=[])
    assert (where.root, where.module) == (str(tmp_path / "work/lib"), "tp.maps")


def test_a_package_directory_that_is_not_an_identifier_leaves_the_file_a_script(tmp_path):
    _write(tmp_path, {"my-pkg/__init__.py": "", "my-pkg/m.py": ""})
    where = locate(tmp_path / "my-pkg/m.py", search=[])
    assert (where.root, where.module) == (str(tmp_path / "my-pkg"), None)


def test_module_names_and_paths_are_told_apart():
    assert looks_like_module_name("megatron.core.transformer.mlp")
    assert not looks_like_module_name("model.py")
    assert not looks_like_module_name("src/model")


@pytest.mark.skipif(importlib.util.find_spec("megatron") is None, reason="megatron-core not installed")
def test_an_installed_module_is_found_by_name_without_importing_it():
    before = set(sys.modules)
    found = module_file("megatron.core.tensor_parallel.mappings")
    assert found is not None and found.endswith("megatron/core/tensor_parallel/mappings.py")
    assert not {name for name in set(sys.modules) - before if name.startswith("megatron")}
    where = locate(found)
    assert where.module == "megatron.core.tensor_parallel.mappings" and where.installed
