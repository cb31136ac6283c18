"""``translate DIR``: every file that imports torch, each as ``translate FILE`` checks it, warm.

One directory holds a file that changes torch's global state, files that verify, a file with a
bug, a file that raises, a file without torch and a file that hangs.  Each gets its own verdict
(the hang is stopped at its time limit, the files after it still run), the exit code is the worst
(violations), and a file's verdict is the one ``translate FILE`` gives it alone: the files' children
are forked from one server per directory, and what one file does to torch does not reach the next.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = "120"      # per file: cold runs alone on a loaded machine need room to import torch
HANG_TIMEOUT = "16"  # the hanging file's run is stopped after half of it

ROW_PARALLEL = '''\
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 4, 8, 4


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, OUT)


def forward(x, w):
    {check}
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return {result}
'''

FILES = {
    # module-level code run at import: default dtype float64, and every all_reduce made a no-op
    "a_global_state.py": '''\
import torch
import torch.distributed as dist

torch.set_default_dtype(torch.float64)
dist.all_reduce = lambda tensor, *args, **kwargs: None


def example_inputs():
    return (torch.randn(4, 8),)


def forward(x):
    dist.all_reduce(x)
    return x * 2
''',
    # verified only if all_reduce is torch's and the default dtype is float32 again
    "b_fresh_state.py": ROW_PARALLEL.format(
        check='if torch.get_default_dtype() != torch.float32:\n'
              '        raise RuntimeError("the default dtype was changed by another file")',
        result="y"),
    "c_violating.py": ROW_PARALLEL.format(check="pass", result="y / world"),   # the sum divided by the world
    "d_raises.py": ROW_PARALLEL.format(check='raise ValueError("this file raises on purpose")', result="y"),
    "e_plain.py": 'print("no torch here")\n',
}
HANGING = {
    "f_hangs.py": ROW_PARALLEL.format(check="while True:\n        pass", result="y"),
    "g_after_hang.py": ROW_PARALLEL.format(check="pass", result="y"),
}


def translate(target: Path, *args: str, timeout: str = TIMEOUT) -> tuple[dict, int, str]:
    proc = subprocess.run([sys.executable, "-c", "from verify_agent.cli import main; main()", "translate",
                           str(target), "--format", "json", "--timeout", timeout, *args],
                          capture_output=True, text=True, cwd=str(REPO), timeout=600)
    return json.loads(proc.stdout), proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> tuple[Path, dict, int, str]:
    folder = tmp_path_factory.mktemp("translate_dir")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    document, code, stderr = translate(folder)
    return folder, document, code, stderr


@pytest.fixture(scope="module")
def hanging(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("translate_dir_hang")
    for name, text in HANGING.items():
        (folder / name).write_text(text, encoding="utf-8")
    return translate(folder, timeout=HANG_TIMEOUT)[0]


def _verdicts(document: dict) -> dict[str, str]:
    return {Path(body["file"]).name: body["verdict"] for body in document["files"]}


def test_every_torch_file_gets_its_own_verdict_and_the_exit_code_is_the_worst(checked):
    folder, document, code, _ = checked
    verdicts = _verdicts(document)
    assert verdicts["b_fresh_state.py"] == "verified"
    assert verdicts["c_violating.py"] == "violations"
    assert verdicts["d_raises.py"] == "input-error"
    assert document["verdict"] == "violations" and code == 1


def test_a_file_without_torch_is_skipped_and_said_so(checked):
    _, document, _, _ = checked
    assert "e_plain.py" not in _verdicts(document)
    assert [Path(item["file"]).name for item in document["skipped"]] == ["e_plain.py"]


def test_a_file_that_raises_is_an_input_error_at_its_line_and_the_others_go_on(checked):
    _, document, _, _ = checked
    (raised,) = [body for body in document["files"] if body["file"].endswith("d_raises.py")]
    assert raised["diagnostics"][0]["line"] == 12
    assert "raises on purpose" in raised["diagnostics"][0]["message"]


def test_a_file_that_hangs_is_stopped_and_the_next_file_still_runs(hanging):
    document = hanging
    verdicts = _verdicts(document)
    assert verdicts["f_hangs.py"] == "unsupported"
    (hung,) = [body for body in document["files"] if body["file"].endswith("f_hangs.py")]
    assert "longer than" in json.dumps(hung["diagnostics"])
    assert verdicts["g_after_hang.py"] == "verified"


def test_global_state_a_file_changes_does_not_reach_the_next_file(checked):
    """a_global_state.py sets float64 and replaces dist.all_reduce when imported; b_fresh_state.py
    raises under float64 and would miss its all-reduce: verified means neither reached it."""
    _, document, _, _ = checked
    assert _verdicts(document)["b_fresh_state.py"] == "verified"


def test_each_file_gets_the_verdict_translate_file_gives_it_alone(checked):
    folder, document, _, _ = checked
    warm = _verdicts(document)
    for name in ("c_violating.py", "b_fresh_state.py"):
        alone, code, _ = translate(folder / name, "--llm", "off")
        assert alone["verdict"] == warm[name], name
        assert code == {"verified": 0, "violations": 1, "input-error": 2, "unsupported": 3}[alone["verdict"]]


def test_each_file_reports_its_cpu_seconds(checked):
    _, document, _, _ = checked
    seconds = [body["stats"]["cpu_seconds"] for body in document["files"]]
    assert all(isinstance(value, float) and value >= 0.0 for value in seconds)
    assert document["stats"]["files"] == len(document["files"]) == 4


def test_options_that_name_one_file_are_refused_for_a_directory(tmp_path):
    (tmp_path / "x.py").write_text("import torch\n", encoding="utf-8")
    document, code, stderr = translate(tmp_path, "--entry", "forward")
    assert code == 2 and document["verdict"] == "input-error"
    assert "--entry" in document["diagnostics"][0]["message"]
