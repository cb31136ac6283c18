"""Canonical hashing: identical layers, microbatches and symmetric ranks are proven once."""
from dataclasses import replace

from verifier.scale import check_plan
from verifier.scale import blocks
from verifier.scale.canonical import canonical_hash, canonical_text
from verifier.scale.faults import NO_FAULT

from .support import small

KINDS_DENSE = 5  # embedding, attention, mlp, head, and one gradient-sync stand-in for all parameters


def test_identical_layers_are_proven_once():
    report = check_plan(small("llama3-405b"), workers=1)
    assert report.stats["proofs"] == KINDS_DENSE
    assert report.stats["by_kind"]["attention"] == {"instances": 6, "classes": 1, "seconds":
                                                    report.stats["by_kind"]["attention"]["seconds"]}


def test_proof_count_does_not_grow_with_layers_microbatches_or_ranks():
    few = check_plan(small("llama3-405b", layers=2, pp=1, microbatches=1), workers=1)
    many = check_plan(small("llama3-405b", layers=12, pp=4, microbatches=8, dp=4), workers=1)
    assert few.stats["proofs"] == many.stats["proofs"] == KINDS_DENSE
    assert many.stats["instances"] > 4 * few.stats["instances"]


def test_a_fault_in_one_layer_adds_exactly_one_proof():
    clean = check_plan(small("llama3-405b"), workers=1)
    faulty = check_plan(small("llama3-405b"), "drop-allreduce:layer=2", workers=1)
    assert faulty.stats["proofs"] == clean.stats["proofs"] + 1
    assert faulty.stats["instances"] == clean.stats["instances"] + 1  # layer 2's mlp: two coordinate classes


def test_moe_plan_proves_one_class_per_block_kind():
    report = check_plan(small("deepseek-v3-671b"), workers=1)
    kinds = report.stats["by_kind"]
    assert {kind: entry["classes"] for kind, entry in kinds.items()} == {
        "embedding": 1, "attention": 1, "mlp": 1, "moe-router": 1, "moe-experts": 1, "head": 1, "grad-sync": 2}


def test_canonical_form_ignores_value_names_and_lines():
    plan = small("llama3-405b")
    first, second = blocks.mlp(plan, 0, NO_FAULT).program, blocks.mlp(plan, 5, NO_FAULT).program
    assert first.inputs[0].name != second.inputs[0].name
    assert canonical_hash(first) == canonical_hash(second)
    moved = replace(second, ops=tuple(replace(op, span=replace(op.span, line=99)) for op in second.ops))
    assert canonical_hash(moved) == canonical_hash(first)


def test_canonical_form_sees_an_attribute_and_a_dim_value():
    plan = small("llama3-405b")
    program = blocks.mlp(plan, 0, NO_FAULT).program
    ops = list(program.ops)
    index = next(i for i, op in enumerate(ops) if op.kind == "reduce_scatter")
    ops[index] = replace(ops[index], attrs={**ops[index].attrs, "op": "avg"})
    assert canonical_hash(replace(program, ops=tuple(ops))) != canonical_hash(program)
    resized = replace(program, dims={**program.dims, "F": 1024})
    assert canonical_hash(resized) != canonical_hash(program)
    assert canonical_hash(resized, with_dim_values=False) == canonical_hash(program, with_dim_values=False)


def test_backward_section_reads_gradients_by_canonical_input_names():
    plan = small("llama3-405b")
    text = canonical_text(blocks.mlp(plan, 3, NO_FAULT).program)
    assert "all_reduce(grad_%1" in text  # the norm weight, input 1, whatever its name
