"""Buggy gallery files with a communication bug get a source patch that, applied to the file,
translates and verifies; the patch changes only the lines it must, in the file's own idioms."""
from __future__ import annotations

import json

import pytest

from frontends import translate_source
from frontends.base import SourceError
from verifier.check import check_program
from verify_agent.repair import source_fixes, suggest_fixes

from .support import MODELS, apply_unified_diff, changed_line_count

EXPECTED = json.loads((MODELS / "expected.json").read_text())

# file -> a fragment the verified patch must add (the idiom of the file's style)
COMMUNICATION_BUGS = {
    "dist_async_read_before_wait.py": "+    work.wait()",
    "dist_colparallel_allgather_wrong_dim.py": "dim=1)",
    "dist_layernorm_sharded_dim.py": "dist.all_gather(h_parts, h)",
    "dist_rowparallel_allgather_instead_of_allreduce.py": "+    dist.all_reduce(y)",
    "dist_rowparallel_allreduce_max.py": "+    dist.all_reduce(y, op=dist.ReduceOp.SUM)",
    "dist_rowparallel_gelu_on_partial.py": "+    dist.all_reduce(h)",
    "dist_softmax_sharded_dim.py": "dist.all_gather(logits_parts, logits)",
    "dist_tp_mlp_double_allreduce.py": "-    dist.all_reduce(out)",
    "dist_tp_mlp_missing_allreduce.py": "+    dist.all_reduce(y)",
    "dtensor_from_local_partial_declared_replicate.py": "[Partial()]",
    "dtensor_local_output_softmax_sharded_dim.py": "ColwiseParallel(",
    "megatron_lm_head_plain_cross_entropy.py": "gather_from_tensor_model_parallel_region(",
    "megatron_mappings_silu_on_partial.py": "F.silu(reduce_from_tensor_model_parallel_region(h @ self.w_out))",
    "megatron_mlp_gather_output_into_row_parallel.py": "gather_output=False",
}
NOT_REPAIRED = {
    "dist_collective_order_rank_dependent.py": "collectives issued in a rank-dependent order: needs reordering "
                                               "statements across branches, not a collective edit",
    "dist_custom_autograd_f_missing_backward_allreduce.py": "the missing collective is in a custom backward "
                                                            "(call ops are not repaired yet)",
    "dist_dp_mean_loss_averaged_twice.py": "scaling bug: an extra division, not a collective",
    "dist_p2p_both_recv_first_deadlock.py": "point-to-point ordering (deadlock), not a collective edit",
    "dist_p2p_pair_exchange_deadlock.py": "point-to-point ordering (deadlock), not a collective edit",
    "dist_rowparallel_sum_divided_by_world.py": "scaling bug: an extra division, not a collective",
    "dist_sequence_parallel_block_rs_wrong_dim.py": "the reshape around the reduce-scatter picks the wrong dim; "
                                                    "repairing it needs a reshape edit",
    "dist_vocab_embedding_unmasked.py": "foreign ids are not masked: local arithmetic, not a collective",
}


def _translate_or_skip(source: str, path: str):
    try:
        translation = translate_source(source, path)
    except SourceError as error:
        pytest.skip(f"the frontend does not read this file yet: {error}")
    if translation.program is None or translation.unsupported:
        pytest.skip(f"the frontend does not translate this file yet: {translation.unsupported[:1]}")
    report = check_program(translation.program, path)
    if report.verdict != "violations":
        pytest.skip(f"the frontend's translation gives {report.verdict}, not the violation to repair")
    return translation, report


def test_every_buggy_gallery_file_is_classified():
    buggy = {name for name, info in EXPECTED.items() if info["verdict"] == "violations"}
    unclassified = buggy - set(COMMUNICATION_BUGS) - set(NOT_REPAIRED)
    assert not unclassified, f"classify these gallery files in COMMUNICATION_BUGS or NOT_REPAIRED: {unclassified}"
    assert (set(COMMUNICATION_BUGS) | set(NOT_REPAIRED)) <= buggy


@pytest.mark.parametrize("name", sorted(COMMUNICATION_BUGS))
def test_patched_source_verifies(name):
    path = MODELS / name
    source = path.read_text()
    translation, report = _translate_or_skip(source, str(path))
    fixes = source_fixes(source, str(path), translation, report, top_k=1)
    assert fixes, "no verified source fix"
    fix = fixes[0]
    assert COMMUNICATION_BUGS[name] in fix.diff
    patched = apply_unified_diff(source, fix.diff)
    assert patched == fix.patched
    again = translate_source(patched, str(path), entry=translation.entry)
    assert check_program(again.program, str(path)).verdict == "verified"
    assert changed_line_count(fix.diff) <= 8  # only the lines the fix needs


def test_suggest_fixes_returns_fixes_ranked_by_cost_for_the_pipeline():
    path = MODELS / "dist_tp_mlp_double_allreduce.py"
    source = path.read_text()
    translation, report = _translate_or_skip(source, str(path))
    fixes = suggest_fixes(source, str(path), translation, report)
    assert fixes and all(fix.patch.startswith("--- a/") for fix in fixes)
    assert [f.comm_cost for f in fixes] == sorted(f.comm_cost for f in fixes)
    assert "remove" in fixes[0].description  # dropping the extra all-reduce is cheaper than op=AVG


def test_untouched_lines_keep_their_formatting():
    path = MODELS / "dist_rowparallel_allreduce_max.py"
    source = path.read_text()
    translation, report = _translate_or_skip(source, str(path))
    fix = source_fixes(source, str(path), translation, report, top_k=1)[0]
    before, after = source.splitlines(), fix.patched.splitlines()
    assert len(before) == len(after)
    assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [21]  # line 22 only
