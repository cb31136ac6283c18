"""Each repair pattern of the table, on the smallest program that shows its symptom.

The table (verifier/synthesis/patterns.py) maps a symptom to the edits worth trying; here
every entry is exercised and the fix it leads to must verify.
"""
from __future__ import annotations

import pytest

from verifier.check import check_program
from verifier.synthesis import Budget, synthesize
from verifier.synthesis.patterns import RULES
from verifier.text_format import parse_program

HEAD = """mesh tp=2
dim S=4, H=4
"""

CASES = {
    "output partial where a shard is expected": (HEAD + """
input x: f32[S, H] {tp: S(1)}
input w: f32[H, H] {tp: S(0)}
p = matmul(x, w) at 10
output p {tp: S(0)}
""", "insert", "reduce_scatter"),
    "output sharded where a replicated value is expected": (HEAD + """
input x: f32[S, H] {tp: R}
input w: f32[H, H] {tp: S(1)}
h = matmul(x, w) at 10
output h {tp: R}
""", "insert", "all_gather"),
    "gather of a value that is already replicated": (HEAD + """
input x: f32[S, H] {tp: S(1)}
input w: f32[H, H] {tp: S(0)}
p = matmul(x, w) at 10
y = all_reduce(p, mesh_dim=tp, op=sum) at 11
g = all_gather(y, mesh_dim=tp, dim=0) at 12
output g {tp: R}
""", "remove", "all_gather"),
    "gather of partial sums that must be added": (HEAD + """
input x: f32[S, H] {tp: S(1)}
input w: f32[H, H] {tp: S(0)}
p = matmul(x, w) at 10
g = all_gather(p, mesh_dim=tp, dim=0) at 11
output g {tp: R}
""", "change", "all_reduce"),
    "all-reduce of shards that must be concatenated": (HEAD + """
input x: f32[S, H] {tp: R}
input w: f32[H, H] {tp: S(1)}
h = matmul(x, w) at 10
y = all_reduce(h, mesh_dim=tp, op=sum) at 11
output y {tp: R}
""", "change", "all_gather"),
    "async handle never waited": (HEAD + """
input x: f32[S, H] {tp: S(1)}
input w: f32[H, H] {tp: S(0)}
p = matmul(x, w) at 10
y = all_reduce(p, mesh_dim=tp, op=sum, handle=work) at 11
z = gelu(y) at 12
output z {tp: R}
""", "insert_wait", None),
}


def test_every_rule_has_a_matcher_and_generators():
    for rule in RULES:
        assert rule.name and rule.match.symptom and rule.generators


@pytest.mark.parametrize("rule_name", sorted(CASES))
def test_pattern_leads_to_a_verified_fix(rule_name):
    text, action, kind = CASES[rule_name]
    program = parse_program(text)
    report = check_program(program)
    assert report.verdict == "violations"
    fix = synthesize(program, report, budget=Budget(top_k=1)).fixes[0]
    assert fix.edits[0].rule and fix.changes[0].action == action
    if kind is not None:
        assert fix.changes[0].kind == kind
    assert check_program(fix.program).verdict == "verified"


def test_divergence_without_placement_explanation_retries_the_collective_above_it():
    program = parse_program((HEAD + """
input g: f32[S, H] {tp: P(avg)}
s = all_reduce(g, mesh_dim=tp, op=avg) at 10
w = world_size(mesh_dim=tp) at 11
avg = div(s, w) at 12
output avg {tp: R}
"""))
    report = check_program(program)
    assert report.verdict == "violations" and all(d.check != "placement" for d in report.diagnostics
                                                  if d.severity == "error")
    fix = synthesize(program, report, budget=Budget(top_k=1)).fixes[0]
    assert fix.edits[0].rule == "change reduce op near the divergence"
    assert fix.changes[0].attr_dict["op"] == "sum"
