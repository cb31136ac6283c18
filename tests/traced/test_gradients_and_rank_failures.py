"""Twin programs (a correct and a buggy one) for the gradients of every floating input, collectives
with autograd (torch.distributed.nn.functional), a reduce-scatter into a buffer, and a rank that
raises where one device does not.  Each program's docstring states its expected verdict; the
gloo ground truth (1 against 2 real ranks, tests/groundtruth/runner.py) backs it in the last test.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import warm_cli

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"

# case -> (verdict, exit code, line of the first error or None, words of its message)
EXPECTED = {
    "g1_tp_mlp_input_grad_bug.py": ("violations", 1, None, "gradient of x differs"),
    "g1_tp_mlp_input_grad_ok.py": ("verified", 0, None, None),
    "g1_tp_mlp_input_grad_no_grad.py": ("verified", 0, None, None),
    "g2_sp_gather_backward_bug.py": ("violations", 1, None, "gradient of x differs"),
    "g2_sp_gather_backward_ok.py": ("verified", 0, None, None),
    "g3_reduce_scatter_layernorm_bug.py": ("violations", 1, None, "output 0 differs"),
    "g3_reduce_scatter_layernorm_ok.py": ("verified", 0, None, None),
    "g4_autograd_collectives_bug.py": ("violations", 1, None, "gradient of"),
    "g4_autograd_collectives_ok.py": ("verified", 0, None, None),
    # raised in DTensor's sharding propagation at the forward (20); named at the plan that chose the placements
    "r1_dtensor_plan_bug.py": ("violations", 1, 30, "rank 0 of 2 raises where the single-device run does not"),
    "r1_dtensor_plan_ok.py": ("verified", 0, None, None),
}
# case -> gloo status of 2 ranks against 1 (grad: outputs and the gradients of every floating input)
GROUND_TRUTH = {
    "g1_tp_mlp_input_grad_bug.py": ("grad", "mismatch"),
    "g1_tp_mlp_input_grad_ok.py": ("grad", "match"),
    "g1_tp_mlp_input_grad_no_grad.py": ("forward", "match"),
    "g2_sp_gather_backward_bug.py": ("grad", "mismatch"),
    "g2_sp_gather_backward_ok.py": ("grad", "match"),
    "g3_reduce_scatter_layernorm_bug.py": ("forward", "mismatch"),
    "g3_reduce_scatter_layernorm_ok.py": ("forward", "match"),
    "gather_trainable_bug.py": ("forward", "mismatch"),
    "g4_autograd_collectives_bug.py": ("grad", "mismatch"),
    "g4_autograd_collectives_ok.py": ("grad", "match"),
    "r1_dtensor_plan_bug.py": ("forward", "error"),
    "r1_dtensor_plan_ok.py": ("forward", "match"),
}


def translate(name: str, *extra: str) -> tuple[int, dict]:
    run = warm_cli.run(["translate", str(CASES / name), "--format", "json", *extra], cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_tool_gives_the_verdict_the_case_states(name):
    verdict, code, line, words = EXPECTED[name]
    got_code, body = translate(name)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (got_code, body["verdict"]) == (code, verdict), errors
    if words is not None:
        assert words in errors[0]["message"], errors
    if line is not None:
        assert errors[0]["line"] == line, errors


def test_no_grad_on_the_command_line_leaves_that_inputs_gradient_out():
    code, body = translate("g1_tp_mlp_input_grad_bug.py", "--no-grad", "x")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert body["passes"]["backward"] == "proven"   # the weights' gradients still are


def test_no_grad_naming_nothing_is_a_usage_error():
    code, body = translate("g1_tp_mlp_input_grad_bug.py", "--no-grad", "y")
    assert code == 2 and "--no-grad y: no input or parameter of that name" in json.dumps(body)


def test_gloo_runs_back_the_stated_verdicts():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    jobs = [gt.Job(gt.JobSpec(str(CASES / name), mode=mode, timeout=10.0 if status == "error" else 60.0), 2)
            for name, (mode, status) in sorted(GROUND_TRUTH.items())]
    results = gt.run_jobs(jobs)
    got = {name: result.status for (name, _), result in zip(sorted(GROUND_TRUTH.items()), results)}
    assert got == {name: status for name, (_, status) in GROUND_TRUTH.items()}
