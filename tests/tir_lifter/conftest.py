"""Fixtures for the lifter tests."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def write_kernel(tmp_path: Path):
    """Write kernel source to a temporary file and return its path as a string."""
    def write(source: str, name: str = "kernel.py") -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return str(path)
    return write
