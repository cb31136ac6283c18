"""Twin cases for Megatron's partition_stride on a fused gate/up weight (real megatron-core, gloo truth).

megatron-core's ColumnParallelLinear with ``stride=2`` gives each rank its chunk of the gate rows
followed by its chunk of the up rows, so ``chunk(2, dim=-1)`` on a rank splits its own gate from its
own up (SwiGLU).  With ``stride=1`` the fused weight is cut in contiguous halves: rank 0 holds only gate
rows, rank 1 only up rows, and the same code computes another function.  The layout is read from the
parameters' recorded values (Megatron's metadata only proposes it).

m2: a GeLU MLP whose column layer is built with ``stride=2`` before a contiguous row layer: the values
go wrong in the column layer's own forward, from operands that are right; the finding names that call
and, as its repair line, the line that built the layer (issue 25, item 4: it had no repair line).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("megatron.core")

pytestmark = [pytest.mark.torch, pytest.mark.realcode]

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--mesh", "tp=2",
                          "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=600)
    return run.returncode, json.loads(run.stdout)


def test_stride_two_pairs_each_ranks_gate_with_its_up_and_is_verified():
    code, body = translate("m1_megatron_swiglu_stride2_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    said = [d["message"] for d in body["diagnostics"] if d["severity"] == "note"]
    assert any(m.startswith("parameter fc1.weight: rank r holds chunk r of 2 in each of 2 blocks of dim 0")
               for m in said), said


def test_stride_one_on_a_fused_weight_is_a_violation_torch_reproduces():
    code, body = translate("m1_megatron_swiglu_stride1_bug.py")
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    assert "reproduced by torch" in errors[0]["message"], errors


def _line_of(name: str, text: str) -> int:
    (line,) = [n for n, row in enumerate((CASES / name).read_text().splitlines(), 1) if text in row]
    return line


def test_a_stride_on_a_column_layer_is_repaired_where_the_layer_is_built():
    code, body = translate("m2_megatron_mlp_stride1_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    bug = "m2_megatron_mlp_stride2_bug.py"
    code, body = translate(bug)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    first = errors[0]
    assert (first["line"], first["repair_line"]) == (_line_of(bug, "self.fc1(hidden_states)"),
                                                     _line_of(bug, "# the bug")), first
    assert "reproduced by torch" in first["message"] and "installed module built at line" in first["message"], first


def test_a_gathered_fused_output_is_repaired_where_the_column_layer_is_built():
    # fc2's operand, F.silu(gate) * up, has its shape from fc1's gather: through the product of two values
    # of one shape and the chunk both runs make alike, to the layer that gathered
    bug = "m3_megatron_swiglu_gather_output_bug.py"
    code, body = translate(bug)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    first = errors[0]
    assert (first["line"], first["repair_line"]) == (_line_of(bug, "self.fc2(F.silu(gate) * up)"),
                                                     _line_of(bug, "# the bug")), first
    assert "cannot be multiplied" in first["message"], first["message"]


def test_gloo_runs_back_both_verdicts():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    ok, bug, ok2, bug2, gathered = rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=120.0), 2) for name in (
        "m1_megatron_swiglu_stride2_ok.py", "m1_megatron_swiglu_stride1_bug.py",
        "m2_megatron_mlp_stride1_ok.py", "m2_megatron_mlp_stride2_bug.py", "m3_megatron_swiglu_gather_output_bug.py")])
    assert gathered.status == rw.STATUS_ERROR and "cannot be multiplied" in (gathered.error or ""), \
        (gathered.status, gathered.error)
    assert ok.status == rw.STATUS_MATCH, (ok.error, ok.details)
    assert ok2.status == rw.STATUS_MATCH, (ok2.error, ok2.details)
    assert bug2.status == rw.STATUS_MISMATCH, (bug2.error, bug2.details)
    assert bug.status == rw.STATUS_MISMATCH, (bug.error, bug.details)
    assert not [d for d in bug.details if d.name.startswith("out") and d.matches], bug.details
