"""Each wrong-verdict pattern of issue 12, as a correct twin and a buggy twin.

The tool's verdicts are asserted here without torch; ``test_groundtruth.py`` runs the
Python cases on real gloo ranks and asserts the numbers agree (or not) as claimed.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from frontends import SourceError, translate_source
from verifier.check import check_program
from verifier.text_format import parse_program
from verify_agent.pipeline import TranslateOptions, translate_and_verify

CASES = Path(__file__).parent / "cases"
REPO = Path(__file__).resolve().parents[2]


def translate(name: str):
    path = CASES / name
    return translate_and_verify(path.read_text(), str(path), TranslateOptions(llm="off"))


def report_of(name: str):
    result = translate(name)
    assert result.usage_error is None, result.usage_error
    return result.report


def check(name: str, **options):
    path = CASES / name
    return check_program(parse_program(path.read_text(), str(path)), str(path), **options)


def errors(report, check_name: str | None = None):
    return [d for d in report.diagnostics if d.severity == "error" and (check_name is None or d.check == check_name)]


# --- 3: engine errors are never violations -----------------------------------------------------

def test_broadcast_source_chosen_by_world_size_is_not_a_violation():
    report = report_of("p03_broadcast_src_by_world_ok.py")
    assert report.verdict == "unsupported"
    assert [d.line for d in errors(report)] == [21]
    assert "world size 1" in errors(report)[0].message


def test_buggy_broadcast_twin_is_not_verified_and_names_the_world_size_branch():
    report = report_of("p03_broadcast_src_by_world_bug.py")
    assert report.verdict == "unsupported"
    assert {d.line for d in errors(report)} == {21, 23}


def test_reference_that_cannot_run_is_unsupported_with_its_line():
    program = parse_program("mesh tp=2\ninput x: f32[4] {tp: R}\ny = broadcast(x, mesh_dim=tp, src=1) at 7\n"
                            "output y {tp: R}\n")
    report = check_program(program)
    assert report.verdict == "unsupported"
    (problem,) = errors(report)
    assert problem.line == 7 and "single-device reference" in problem.message


# --- 4: collective argument rules as torch enforces them ------------------------------------------

@pytest.mark.parametrize("name, line, argument", [("p04_scatter_list_on_every_rank_bug.py", 23, "scatter_list"),
                                                   ("p04_gather_list_on_every_rank_bug.py", 22, "gather_list")])
def test_rooted_list_on_every_rank_is_an_input_error_at_its_line(name, line, argument):
    result = translate(name)
    assert result.report is None
    assert result.usage_error.startswith(f"{CASES / name}:{line}:")
    assert argument in result.usage_error and "must NOT be specified" in result.usage_error


def test_scatter_list_on_the_source_rank_only_verifies():
    assert report_of("p04_scatter_list_on_source_only_ok.py").verdict == "verified"


def test_gather_list_on_the_destination_only_is_not_an_error():
    report = report_of("p04_gather_list_on_destination_only_ok.py")
    assert report.verdict == "unsupported"  # a value that exists on one rank only: not modelled
    assert not errors(report, "well-formed")


def test_scatter_list_missing_on_the_source_is_an_input_error():
    source = (CASES / "p04_scatter_list_on_source_only_ok.py").read_text().replace("if rank == 0 else None",
                                                                                   "if rank == 1 else None")
    with pytest.raises(SourceError, match="scatter_list is missing on rank 0"):
        translate_source(source, "scatter.py")


# --- 5: point-to-point tags ---------------------------------------------------------------------

def test_tagged_messages_received_in_the_other_order_are_matched_by_tag():
    report = check("p05_tagged_messages_swap.vir")
    assert report.verdict == "verified"
    assert report.extra["passes"]["temporal"] == "proven"


def test_engine_routes_each_message_to_the_receive_with_its_tag():
    import numpy as np

    from verifier.equivalence import random_inputs, run_concrete
    program = parse_program((CASES / "p05_tagged_messages_swap.vir").read_text())
    inputs = random_inputs(program, 0)
    outcome = run_concrete(program, {}, inputs)
    for env in outcome.per_rank:
        np.testing.assert_allclose(env["out"], inputs["kv"] + 10 * 2 * inputs["kv"])


def test_blocking_sends_against_receives_in_the_other_tag_order_deadlock():
    report = check("p05_blocking_sends_reordered_tags.vir")
    assert report.verdict == "violations"
    (deadlock,) = errors(report, "deadlock")
    assert deadlock.line == 6 and "tag 1" in deadlock.message and "tag 2" in deadlock.message


def test_python_isend_with_tags_is_deadlock_free_and_blocking_twin_deadlocks():
    fine = report_of("p05_p2p_tags_isend_ok.py")
    assert fine.extra["passes"]["temporal"] == "proven" and fine.verdict != "violations"
    stuck = report_of("p05_p2p_tags_blocking_deadlock.py")
    assert stuck.verdict == "violations"
    assert errors(stuck, "deadlock")[0].line == 28


def test_tag_round_trips_through_the_text_form():
    from verifier.text_format import print_program
    program = parse_program((CASES / "p05_tagged_messages_swap.vir").read_text())
    assert parse_program(print_program(program)) == program
    assert [op.attrs.get("tag") for op in program.ops if op.kind in ("isend", "irecv")] == [1, 2, 2, 1]


# --- 7: reduced sizes ----------------------------------------------------------------------------

def test_shard_extent_does_not_collapse_to_one_so_the_interleaving_bug_shows():
    report = check("p07_gather_reshape_interleaves.vir")
    assert report.verdict == "violations"
    assert errors(report)[0].line == 8
    sizes = report.extra["reduced_dims"]
    assert sizes["S"] // 2 >= 2 and sizes["S"] != sizes["H"]


def test_correct_gather_twin_verifies_and_states_its_sizes():
    report = check("p07_gather_rows_ok.vir")
    assert report.verdict == "verified"
    stated = report.to_json()
    assert stated["sizes"].startswith("dims S=4, H=3") and "mesh tp=2" in stated["sizes"]
    assert "S=4" in report.proven[-1]


# --- 9: vacuous passes ---------------------------------------------------------------------------

def test_collectives_outside_the_entry_make_the_run_unsupported_naming_their_lines():
    report = report_of("p09_module_level_plan_outside_entry.py")
    assert report.verdict == "unsupported"
    assert [d.line for d in errors(report)] == [26, 27]


def test_module_level_parallelize_plan_is_named():
    source = ("import torch\nimport torch.nn as nn\nfrom torch.distributed.device_mesh import init_device_mesh\n"
              "from torch.distributed.tensor.parallel import parallelize_module, ColwiseParallel\n\n"
              "def example_inputs():\n    return (torch.randn(4, 8), torch.randn(8, 6))\n\n"
              "def forward(x, w):\n    return x @ w\n\n"
              "def main():\n    mesh = init_device_mesh('cpu', (2,))\n    model = nn.Linear(8, 6)\n"
              "    parallelize_module(model, mesh, {'': ColwiseParallel()})\n")
    translation = translate_source(source, "plan.py", entry="forward")
    assert [line for line, _ in translation.uncovered] == [13, 15]


# --- 12: one time budget for all obligations -----------------------------------------------------

def test_many_obligations_end_within_the_budget_as_unsupported_timeout():
    text = (REPO / "examples" / "ir" / "vocab_parallel_embedding_masked_ok.vir").read_text()
    program = parse_program(text.replace("dim S=3, V=6, H=2", "dim S=48, V=16, H=4"))
    lines: list[str] = []
    started = time.process_time()   # the budget counts this process's CPU time, not the wall clock
    report = check_program(program, budget_s=0.5, progress=lines.append)  # far less than the proof needs
    used = time.process_time() - started
    assert used < 0.5 + 2.0
    assert report.verdict == "unsupported"
    assert "timeout" in errors(report)[0].message


# --- every verdict says what was proven and assumed ----------------------------------------------

def test_every_verdict_states_passes_sizes_and_assumptions():
    for name in ("p07_gather_rows_ok.vir", "p07_gather_reshape_interleaves.vir", "p05_blocking_sends_reordered_tags.vir"):
        body = check(name).to_json()
        assert set(body["passes"]) == {"forward", "backward", "temporal"}
        assert body["sizes"] and body["assumed"] and body["assumed"][0].startswith("inputs:")
    assert check("p07_gather_rows_ok.vir").extra["passes"]["forward"] == "proven"
    assert check("p07_gather_reshape_interleaves.vir").extra["passes"]["forward"] == "violated"


def test_untranslated_custom_backward_is_not_a_pass_of_gradients():
    report = report_of("p09_untranslated_backward.py")
    assert report.verdict == "unsupported"
    assert report.extra["passes"]["forward"] == "proven"
    assert report.extra["passes"]["backward"].startswith("not checked")
    (problem,) = errors(report)
    assert problem.line == 30 and "was not translated" in problem.message


# --- 11 (coverage): `return` inside a rank branch -------------------------------------------------

def test_return_inside_a_rank_branch_merges_the_values_rank_by_rank():
    assert report_of("p11_return_in_rank_branch_ok.py").verdict == "verified"
    report = report_of("p11_return_in_rank_branch_bug.py")
    assert report.verdict == "violations"
    assert errors(report)[0].line == 21
