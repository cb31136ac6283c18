"""`--mesh tp=4 --shard ...`: derived per-rank program, collective and its proof."""
from __future__ import annotations

from tir_lifter import run_lift

from lifter_helpers import EXAMPLES


def _lift(name: str, *shards: str):
    return run_lift(str(EXAMPLES / name), mesh="tp=4", shards=list(shards), frontend="text")


def test_sharded_reduction_axis_needs_an_all_reduce_and_is_proven():
    report = _lift("gemm.py", "A=Shard(1)", "B=Shard(0)")
    assert report.verdict == "verified"
    assert "C = all_reduce(C_local, op=sum, mesh_dim=tp)" in report.extra["derived_program"]
    assert any(p.startswith("tp=4:") and "all_reduce" in p for p in report.proven)


def test_sharded_output_rows_turn_the_all_reduce_into_a_reduce_scatter():
    report = _lift("gemm.py", "A=Shard(1)", "B=Shard(0)", "C=Shard(0)")
    assert report.verdict == "verified"
    assert "reduce_scatter(C_local, dim=0, op=sum, mesh_dim=tp)" in report.extra["derived_program"]


def test_row_sharded_input_needs_an_all_gather():
    report = _lift("gemm.py", "A=Shard(0)")
    assert report.verdict == "verified"
    assert "all_gather(C_local, dim=0" in report.extra["derived_program"]


def test_fused_relu_on_a_partial_sum_is_a_violation_with_per_rank_values():
    report = _lift("gemm_relu.py", "A=Shard(1)", "B=Shard(0)")
    assert report.verdict == "violations"
    [diag] = [d for d in report.diagnostics if d.check == "distributed"]
    assert "relu" in diag.message and "P(sum)" in diag.message
    assert diag.counterexample.confirmed and set(diag.counterexample.per_rank) == {f"rank {r}" for r in range(4)}


def test_sharding_only_one_operand_of_the_contraction_is_a_placement_error():
    report = _lift("gemm.py", "A=Shard(1)")
    assert report.verdict == "violations"
    assert any(d.check == "placement" and "B holds all of K" in d.message for d in report.diagnostics)
