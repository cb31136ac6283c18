"""`fix_file`: report, ranked fixes, and with write=True the patched file verifies end to end."""
from __future__ import annotations

import shutil

from verify_agent.pipeline import TranslateOptions
from verify_agent.repair.commands import fix_file

from .support import MODELS

# these pin the static reading's repair (the traced reading, which also compares the gradients of
# these plain torch.distributed files, is tested in tests/repair)
STATIC = TranslateOptions(llm="off", no_exec=True)


def test_write_applies_the_cheapest_fix_and_the_file_verifies(tmp_path):
    target = tmp_path / "mlp.py"
    shutil.copy(MODELS / "dist_tp_mlp_double_allreduce.py", target)
    before, fixes, after = fix_file(target, top_k=2, write=True, options=STATIC)
    assert before.verdict == "violations"
    assert fixes and [f.comm_cost for f in fixes] == sorted(f.comm_cost for f in fixes)
    assert after is not None and after.verdict == "verified"
    assert "dist.all_reduce(out)" not in target.read_text()


def test_without_write_the_file_is_left_alone(tmp_path):
    target = tmp_path / "mlp.py"
    shutil.copy(MODELS / "dist_tp_mlp_missing_allreduce.py", target)
    original = target.read_text()
    before, fixes, after = fix_file(target, top_k=1, options=STATIC)
    assert before.verdict == "violations" and before.fixes == fixes and len(fixes) == 1
    assert after is None and target.read_text() == original


def test_a_verified_file_has_no_fixes(tmp_path):
    target = tmp_path / "ok.py"
    shutil.copy(MODELS / "dist_tp_mlp_ok.py", target)
    before, fixes, after = fix_file(target, write=True, options=STATIC)
    assert before.verdict == "verified" and fixes == [] and after is None
