"""The IR's JSON form and schema, and the prompt templates and few-shot examples built from them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

import prompts
from agent.faithfulness import check_faithfulness
from agent.ir_json import ir_schema, program_from_json, program_to_json, schema_text
from agent.prompting import JSON, VIR, few_shot, system_prompt
from agent.source_facts import read_source
from verifier.check import check_program
from verifier.registry import all_rules
from verifier.text_format import parse_program, print_program

ROOT = Path(__file__).resolve().parents[2]
VIR_FILES = sorted((ROOT / "examples" / "ir").rglob("*.vir")) + sorted((ROOT / "prompts" / "examples").glob("*.vir"))


@pytest.mark.parametrize("path", VIR_FILES, ids=lambda p: p.name)
def test_json_form_round_trips(path):
    program = parse_program(path.read_text(), str(path))
    assert program_from_json(json.dumps(program_to_json(program)), str(path)) == program


def test_published_schema_is_up_to_date():
    # regenerate with: python -m agent.schema > prompts/ir.schema.json
    assert prompts.schema_text() == schema_text()


def test_schema_describes_placements_as_strings_by_mesh_dim():
    schema = ir_schema()
    placements = schema["$defs"]["InputJSON"]["properties"]["placements"]
    assert placements["type"] == "object" and placements["additionalProperties"] == {"type": "string"}
    assert schema["required"] == ["mesh", "inputs", "ops", "outputs"]


def test_json_errors_name_their_place():
    bad = {"mesh": {"tp": 2}, "inputs": [{"name": "x", "shape": [4], "placements": {"tp": "S(x)"}}],
           "ops": [{"op": "relu", "args": "x"}], "outputs": []}
    with pytest.raises(ValidationError) as error:
        program_from_json(bad)
    locations = {".".join(map(str, e["loc"])) for e in error.value.errors()}
    assert locations == {"inputs.0.placements", "ops.0.args"}


def test_placement_for_an_unknown_mesh_dim_is_rejected():
    bad = {"mesh": {"tp": 2}, "inputs": [{"name": "x", "shape": [4], "placements": {"dp": "R"}}], "ops": [],
           "outputs": []}
    with pytest.raises(ValueError, match="placement for 'dp', but the mesh has tp"):
        program_from_json(bad)


@pytest.mark.parametrize("pair", prompts.example_pairs(), ids=lambda p: p.name)
def test_few_shot_example_has_its_expected_verdict(pair):
    expected = re.search(r"# expected: (\w+)", pair.ir_text).group(1)
    assert check_program(parse_program(pair.ir_text), pair.name).verdict == expected


@pytest.mark.parametrize("pair", prompts.example_pairs(), ids=lambda p: p.name)
def test_few_shot_example_is_faithful_to_its_source(pair):
    facts = read_source(pair.source, f"{pair.name}.py")
    assert check_faithfulness(parse_program(pair.ir_text), facts) == []


def test_few_shot_examples_are_printed_by_the_ir_printer():
    text = few_shot(VIR)
    for pair in prompts.example_pairs():
        assert print_program(parse_program(pair.ir_text)) in text
        assert "# expected" not in text  # comments of the stored files are not shown
    for pair in prompts.example_pairs():
        assert json.dumps(program_to_json(parse_program(pair.ir_text)), separators=(", ", ": ")) in few_shot(JSON)


def _prompt_ops() -> set[str]:
    listed = set()
    for row in re.findall(r"^\| ([a-z_ ]+) \|", prompts.read("ir_reference"), flags=re.M):
        listed.update(row.split())
    return listed - {"op"}  # the header row


def test_ir_reference_names_only_registered_ops():
    assert _prompt_ops() <= set(all_rules())


def test_ir_reference_covers_the_documented_op_catalogue():
    documented = set()
    for row in re.findall(r"^\| ((?:`[a-z_]+`\s*(?:/\s*)?)+)\|", (ROOT / "docs" / "ir.md").read_text(), flags=re.M):
        documented.update(re.findall(r"`([a-z_]+)`", row))
    assert documented and documented <= _prompt_ops()


def test_system_prompt_fills_every_placeholder():
    for response_format in (JSON, VIR):
        text = system_prompt(response_format)
        assert "$" not in text.replace("$schema", "")
        assert "FAITHFUL" in text


def test_missing_placeholder_is_an_error():
    with pytest.raises(KeyError):
        prompts.render("feedback", problems="1. x")


def test_prompt_version_names_the_template_files():
    folder = ROOT / "prompts"
    assert {p.name for p in folder.glob(f"*_{prompts.PROMPT_VERSION}.txt")} >= {
        "system_v1.txt", "translate_v1.txt", "feedback_v1.txt", "task_full_v1.txt", "task_auto_v1.txt",
        "format_json_v1.txt", "format_vir_v1.txt", "ir_reference_v1.txt"}
