"""Faithfulness: an IR is held against the source's own lines, names and example inputs."""
from __future__ import annotations

import textwrap
from pathlib import Path

from agent.faithfulness import check_faithfulness
from agent.source_facts import read_source
from agent_cases import IR_MISSING, IR_OK, ROW_MISSING, ROW_OK
from verifier.ir import Mesh
from verifier.text_format import parse_program

TP2 = Mesh((("tp", 2),))


def problems(source: str, ir: str, **kwargs) -> list[str]:
    facts = read_source(textwrap.dedent(source), "model.py")
    return [str(p) for p in check_faithfulness(parse_program(textwrap.dedent(ir)), facts, **kwargs)]


def test_faithful_translation_has_no_problems():
    assert problems(ROW_OK, IR_OK, expected_mesh=TP2) == []


def test_faithful_translation_of_a_buggy_source_has_no_problems():
    assert problems(ROW_MISSING, IR_MISSING, expected_mesh=TP2) == []


def test_missing_collective_is_reported_with_its_line():
    found = problems(ROW_OK, IR_MISSING)
    assert len(found) == 1
    assert "line 17: `dist.all_reduce(y)` runs on every call of the entry but no op of kind all_reduce" in found[0]


def test_other_mesh_is_rejected():
    found = problems(ROW_OK, IR_OK.replace("mesh tp=2", "mesh tp=1"), expected_mesh=TP2)
    assert found == ["[faithfulness] the mesh must be `mesh tp=2` (from the command line, the file or the default), "
                     "not `mesh tp=1`"]


def test_input_shape_must_match_example_inputs():
    found = problems(ROW_OK, IR_OK.replace("dim N=4, D=8", "dim N=2, D=8"))
    assert any("input x has shape 2x8 in the IR but 4x8 in example_inputs()" in p for p in found)


def test_command_line_input_shapes_override_example_inputs():
    assert problems(ROW_OK, IR_OK.replace("dim N=4, D=8", "dim N=2, D=8"), input_shapes={"x": [2, 8]}) == []


def test_entry_arguments_must_be_inputs_with_their_names():
    found = problems(ROW_OK, IR_OK.replace("input w:", "input weight:").replace("(w,", "(weight,"))
    assert any("the entry forward receives 'w' (shape 8x8) but the IR declares no input named 'w'" in p for p in found)
    assert any("input 'weight' does not name anything in the source" in p for p in found)


def test_entry_arguments_are_replicated():
    found = problems(ROW_OK, IR_OK.replace("input w: f32[D, D] {tp: R}", "input w: f32[D, D] {tp: S(0)}"))
    assert any("input w is an argument of the entry, so every rank receives the whole tensor" in p for p in found)


def test_outputs_are_replicated_and_counted():
    found = problems(ROW_OK, IR_OK.replace("output y_sum {tp: R}", "output y_sum {tp: P(sum)}\noutput y {tp: R}"))
    assert any("output y_sum: every rank returns the global value" in p for p in found)
    assert any("the entry returns 1 value(s) but the IR declares 2 output(s)" in p for p in found)


def test_every_op_needs_a_code_line():
    found = problems(ROW_OK, IR_OK.replace("y = matmul(x_local, w_local) at 16", "y = matmul(x_local, w_local)")
                     .replace("at 15", "at 4"))
    assert any("`y = matmul(x_local, w_local)` has no source line" in p for p in found)
    assert any("cites line 4, which is not code" in p for p in found)


def test_rank_op_must_cite_a_line_that_reads_the_rank():
    found = problems(ROW_OK, IR_OK.replace("y = matmul(x_local, w_local) at 16",
                                           "y = matmul(x_local, w_local) at 16\nr = rank(mesh_dim=tp) at 16"))
    assert any("does not read the rank" in p for p in found)


HELPER = """
    import torch
    import torch.distributed as dist


    def reduce(t):
        dist.all_reduce(t)
        return t


    def example_inputs():
        return (torch.randn(4, 4),)


    def forward(x):
        return reduce(reduce(x)){extra}
"""
HELPER_IR = """
    mesh tp=2
    input x: f32[4, 4] {{tp: R}} at 14
    a = all_reduce(x, mesh_dim=tp, op=sum) at 7
    {second}
    output {out} {{tp: R}}
"""


def test_helper_called_twice_accounts_for_two_collectives():
    ir = HELPER_IR.format(second="b = all_reduce(a, mesh_dim=tp, op=sum) at 7", out="b")
    assert problems(HELPER.format(extra=""), ir) == []


def test_helper_called_once_cannot_account_for_two_collectives():
    source = HELPER.format(extra="").replace("reduce(reduce(x))", "reduce(x) * 2")
    ir = HELPER_IR.format(second="b = all_reduce(a, mesh_dim=tp, op=sum) at 7", out="b")
    found = problems(source, ir)
    assert any("performs 1 all_reduce per call of the entry, but 2 ops cite it" in p for p in found)


def test_collective_under_a_config_branch_is_not_required():
    source = """
        import torch
        import torch.distributed as dist

        SEQUENCE_PARALLEL = False


        def example_inputs():
            return (torch.randn(4, 4),)


        def forward(x):
            if SEQUENCE_PARALLEL:
                dist.all_reduce(x)
            return x * 2
    """
    ir = """
        mesh tp=2
        input x: f32[4, 4] {tp: R} at 12
        y = mul(x, scalar=2) at 15
        output y {tp: R}
    """
    assert problems(source, ir) == []


def test_collective_under_a_rank_branch_is_required():
    source = """
        import torch
        import torch.distributed as dist


        def example_inputs():
            return (torch.randn(4, 4),)


        def forward(x):
            if dist.get_rank() == 0:
                dist.broadcast(x, src=0)
            return x
    """
    ir = """
        mesh tp=2
        input x: f32[4, 4] {tp: R} at 10
        output x {tp: R}
    """
    found = problems(source, ir)
    assert any("no op of kind broadcast cites line 12" in p for p in found)


def test_handle_needs_an_async_call():
    source = ROW_OK
    ir = IR_OK.replace("op=sum) at 17", "op=sum, handle=h) at 17\nwait(handle=h) at 17")
    found = problems(source, ir)
    assert any("is asynchronous (handle=h), but the call on line 17 is synchronous" in p for p in found)


def test_megatron_mapping_needs_its_collective():
    source = Path(__file__).resolve().parents[2] / "prompts" / "examples" / "megatron_mappings.py"
    ir = (source.with_suffix(".vir").read_text()
          .replace("y = all_reduce(b, mesh_dim=tp, op=sum) at 21\noutput y", "output b"))
    found = [str(p) for p in check_faithfulness(parse_program(ir), read_source(source.read_text(), str(source)))]
    assert any("reduce_from_tensor_model_parallel_region" in p and "no op of kind all_reduce cites line 21" in p
               for p in found)


def test_dtensor_plan_entry_may_carry_its_collective():
    source = Path(__file__).resolve().parents[2] / "prompts" / "examples" / "dtensor_plan.py"
    ir = source.with_suffix(".vir").read_text()
    assert check_faithfulness(parse_program(ir), read_source(source.read_text(), str(source))) == []
    moved = ir.replace("y = all_reduce(p, mesh_dim=tp, op=sum) at 27", "y = all_reduce(p, mesh_dim=tp, op=sum) at 29")
    found = [str(p) for p in check_faithfulness(parse_program(moved), read_source(source.read_text(), str(source)))]
    assert any("claims an all_reduce, but line 29" in p for p in found)


def test_frontend_collectives_must_be_kept():
    frontend = parse_program(IR_OK)
    found = problems(ROW_OK, IR_MISSING, frontend=frontend)
    assert any("the deterministic frontend translated line 17 as `y_sum = all_reduce(y, mesh_dim=tp, op=sum) at 17`"
               in p for p in found)
