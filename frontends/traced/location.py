"""Where a file lives: the directory it is imported from and its module name there.

A file inside a package is run as ``package.module`` (relative imports work, and the package's
own helpers, its ``mpu`` or ``parallel_state``, are the package's modules, not copies).  The
import root is, in order:

1. a ``--path DIR`` or a ``sys.path`` entry (site-packages: an installed library) the file lies
   under, when the dotted name found from there leads back to this file;
2. the project's declared package directory (pyproject ``[tool.setuptools.package-dir]`` /
   ``packages.find where``, setup.cfg ``package_dir`` / ``where``, or the project directory
   itself), when the file is inside a package there whose top has no ``__init__.py`` (a
   namespace package such as ``megatron`` in a Megatron-LM checkout);
3. the directory above the outermost ``__init__.py`` found walking up from the file.

A file with no ``__init__.py`` beside it is a script: imported from its own directory, as before.
Pure path logic (no import of the user's code); ``module_file`` finds an installed module's file
the same way, without importing it.
"""
from __future__ import annotations

import configparser
import importlib.machinery
import os
import sys
from dataclasses import dataclass
from pathlib import Path

try:  # Python >= 3.11
    import tomllib
except ImportError:  # pragma: no cover - 3.10
    tomllib = None

_PROJECT_FILES = ("pyproject.toml", "setup.cfg", "setup.py")


@dataclass(frozen=True)
class Location:
    root: str                  # put first on sys.path
    module: str | None         # dotted name; None: a script, imported from ``root`` under a private name
    installed: bool = False    # under a sys.path entry that is not the user's (an installed library)

    def describe(self) -> str | None:
        if self.module is None:
            return None
        where = "an installed library" if self.installed else "its package"
        return f"imported as {self.module} from {self.root} ({where}), so relative imports and the package's own " \
               f"helpers are the real ones"


def locate(path: str | os.PathLike, paths: tuple[str, ...] = (), search: list[str] | None = None) -> Location:
    """The import root and module name of the file at ``path`` (see the module's docstring)."""
    file = Path(path).resolve()
    top = file.parent   # the outermost package directory holding the file (its own directory for a script)
    in_package = (top / "__init__.py").is_file()
    while in_package and (top.parent / "__init__.py").is_file() and top.parent != top.parent.parent:
        top = top.parent
    base = top.parent if in_package else top
    given = [Path(p).resolve() for p in paths]
    here = Path.cwd().resolve()
    listed = [Path(p).resolve() for p in (sys.path if search is None else search) if p]
    listed = [p for p in listed if p != here and (in_package or _is_site_dir(p))]
    # the deepest root at or above the package's parent: a deeper one would cut the package in two
    for roots, installed in ((given, False), (listed, True)):
        for root in sorted((r for r in roots if r == base or r in base.parents), key=lambda r: -len(r.parts)):
            name = _name_under(file, root)
            if name and _leads_back(name, root, file):
                return Location(str(root), name, installed and _is_site_dir(root))
    if not in_package:
        return Location(str(file.parent), None)
    declared = _declared_package_dir(base)
    if declared is not None and declared in base.parents:
        name = _name_under(file, declared)
        if name and _leads_back(name, declared, file):
            return Location(str(declared), name)
    name = _name_under(file, base)
    return Location(str(base), name) if name else Location(str(file.parent), None)


def module_file(name: str, paths: tuple[str, ...] = ()) -> str | None:
    """The file of module ``name`` (a package's ``__init__.py``) found on ``paths`` then ``sys.path``,
    without importing it (nor its parent packages)."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    search = [str(Path(p).resolve()) for p in paths] + [p for p in sys.path if p]
    spec = None
    for index in range(len(parts)):
        full = ".".join(parts[:index + 1])
        spec = importlib.machinery.PathFinder.find_spec(full, search)
        if spec is None:
            return None
        if index + 1 < len(parts):
            search = list(spec.submodule_search_locations or [])
            if not search:
                return None
    origin = getattr(spec, "origin", None)
    if origin in (None, "namespace") or not origin.endswith(".py"):
        return None
    return origin


def looks_like_module_name(text: str) -> bool:
    """``megatron.core.transformer.mlp``: dotted identifiers, not a path to a file."""
    return not text.endswith(".py") and os.sep not in text and "/" not in text \
        and all(part.isidentifier() for part in text.split("."))


def _name_under(file: Path, root: Path) -> str | None:
    try:
        relative = file.relative_to(root)
    except ValueError:
        return None
    parts = list(relative.parts)
    if not parts or not parts[-1].endswith(".py"):
        return None
    parts[-1] = parts[-1][:-3]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts)


def _leads_back(name: str, root: Path, file: Path) -> bool:
    """Importing ``name`` with ``root`` first on sys.path finds ``file`` (not a shadowing module)."""
    found = module_file(name, (str(root),))
    return found is not None and Path(found).resolve() == file


def _is_site_dir(root: Path) -> bool:
    return root.name in ("site-packages", "dist-packages")


def _declared_package_dir(start: Path) -> Path | None:
    """The package directory the nearest project above ``start`` declares (its own directory when it
    declares none); None without a project file."""
    for folder in [start, *start.parents]:
        if any((folder / name).is_file() for name in _PROJECT_FILES):
            return folder / (_pyproject_dir(folder / "pyproject.toml") or _setup_cfg_dir(folder / "setup.cfg") or "")
        if (folder / ".git").exists():
            return None
    return None


def _pyproject_dir(path: Path) -> str | None:
    if tomllib is None or not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    setuptools = data.get("tool", {}).get("setuptools", {})
    package_dir = setuptools.get("package-dir", {})
    if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
        return package_dir[""]
    find = setuptools.get("packages", {})
    where = find.get("find", {}).get("where") if isinstance(find, dict) else None
    if isinstance(where, list) and len(where) == 1 and isinstance(where[0], str):
        return where[0]
    for package in data.get("tool", {}).get("poetry", {}).get("packages", []) or []:
        if isinstance(package, dict) and isinstance(package.get("from"), str):
            return package["from"]
    return None


def _setup_cfg_dir(path: Path) -> str | None:
    if not path.is_file():
        return None
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    for line in parser.get("options", "package_dir", fallback="").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "" and value.strip():
            return value.strip()
    where = parser.get("options.packages.find", "where", fallback="").strip()
    return where or None
