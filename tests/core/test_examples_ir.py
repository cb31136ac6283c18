"""Every IR example gets the verdict written in its header, and violations name their line."""
import re
from pathlib import Path

import pytest

from verifier.check import check_program
from verifier.text_format import parse_program

EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "ir").rglob("*.vir"))

# The line each buggy example must be blamed on (the op that is wrong, or after which the
# missing collective belongs).
BLAMED_LINE = {
    "megatron_mlp_missing_allreduce.vir": 12,
    "layernorm_sharded_hidden.vir": 11,
    "vocab_parallel_embedding_unmasked.vir": 13,
    "scaling_divide_after_sum.vir": 12,
    "row_parallel_reduce_scatter_max.vir": 11,
    "double_allreduce.vir": 12,
    "gelu_on_partial_sum.vir": 11,
    "gather_wrong_dim.vir": 11,
    "bias_before_allreduce.vir": 10,
    "sequence_parallel_wrong_dim.vir": 15,
    "megatron_mlp_f_missing_backward_allreduce.vir": 10,
    "sequence_parallel_norm_grad_not_reduced.vir": 10,
    "dp_gradient_averaged_twice.vir": 21,
    "custom_function_f_missing_allreduce.vir": 20,
}


def expected_verdict(path: Path) -> str:
    return re.search(r"# expected: (\w+)", path.read_text()).group(1)


def test_the_gallery_covers_the_required_programs():
    names = {path.name for path in EXAMPLES}
    assert {"megatron_mlp_ok.vir", "megatron_mlp_missing_allreduce.vir", "sequence_parallel_block_ok.vir",
            "layernorm_sharded_hidden.vir", "vocab_parallel_embedding_masked_ok.vir",
            "vocab_parallel_embedding_unmasked.vir", "head_parallel_attention_ok.vir", "dp_tp_mlp_ok.vir",
            "scaling_divide_after_sum.vir"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_verdict(path):
    report = check_program(parse_program(path.read_text(), str(path)), str(path))
    assert report.verdict == expected_verdict(path), report.to_json()["diagnostics"]
    if report.verdict == "violations":
        errors = [d for d in report.diagnostics if d.severity == "error"]
        assert errors[0].line == BLAMED_LINE[path.name]
        confirmed = [d.counterexample for d in errors if d.counterexample is not None]
        assert confirmed and confirmed[0].confirmed
    else:
        assert any("equivalent to the single-device program" in fact for fact in report.proven)


def test_backward_examples_check_gradients_too():
    path = Path(__file__).parents[2] / "examples" / "ir" / "backward" / "megatron_mlp_fg_ok.vir"
    report = check_program(parse_program(path.read_text(), str(path)), str(path))
    assert report.verdict == "verified" and report.extra["backward_ops"] > 10
