"""Running `verify-agent translate` on a case of tests/traced/cases as a user would, for the tests."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"


def translate(name: str, *extra: str, timeout: float = 300) -> tuple[int, dict]:
    """(exit code, JSON report) of ``translate`` on case ``name`` with ``extra`` arguments."""
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), *extra,
                          "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=timeout)
    return run.returncode, json.loads(run.stdout)


def marked_line(path: Path) -> int:
    """The line of ``path`` marked ``# the bug``."""
    (line,) = [n for n, text in enumerate(path.read_text().splitlines(), 1) if "# the bug" in text]
    return line
