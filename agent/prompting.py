"""Build the first request: system prompt (IR reference, answer format, few-shot examples) and task.

The few-shot IRs are parsed and re-printed with the IR's own printer (or converted to its
JSON form) every time a prompt is built, so an example can never show syntax the parser no
longer accepts.  The source is shown with line numbers because every op must cite one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import prompts
from frontends.base import Translation
from verifier.ir import Mesh
from verifier.text_format import parse_program, print_program

from .ir_json import program_to_json
from .source_facts import SourceFacts

JSON, VIR = "json", "vir"


def numbered(source: str) -> str:
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{number:>{width}} | {text}" for number, text in enumerate(lines, start=1))


def render_ir(text: str, response_format: str) -> str:
    """A ``.vir`` text as the model should answer it: printed IR or its JSON form."""
    program = parse_program(text)
    if response_format == JSON:
        return json.dumps(program_to_json(program), separators=(", ", ": "))
    return "```vir\n" + print_program(program) + "```"


def few_shot(response_format: str) -> str:
    blocks = []
    for pair in prompts.example_pairs():
        answer = render_ir(pair.ir_text, response_format)
        blocks.append(f"### {pair.name}.py\n{numbered(pair.source)}\n\n### IR\n{answer}")
    return "\n\n".join(blocks)


def system_prompt(response_format: str) -> str:
    return prompts.render("system", ir_reference=prompts.read("ir_reference").strip(),
                          answer_format=prompts.read(f"format_{response_format}").strip(),
                          examples=few_shot(response_format))


@dataclass(frozen=True)
class Task:
    """What the first user message says: which file, entry, mesh and inputs, and what to do."""

    source: str
    path: str
    facts: SourceFacts
    mode: str
    mesh: Mesh
    base: Translation | None = None
    input_shapes: dict[str, list[int]] | None = None


def _inputs(task: Task) -> str:
    shapes = dict(task.input_shapes or {})
    rows = []
    for example in task.facts.example_inputs:
        shape = shapes.pop(example.param, None) if example.param else None
        shape = shape or (list(example.shape) if example.shape else None)
        size = "x".join(map(str, shape)) if shape else "size not literal"
        rows.append(f"- {example.param or '?'}: {size} ({example.dtype})")
    rows += [f"- {name}: {'x'.join(map(str, shape))}" for name, shape in shapes.items()]
    return "\n".join(rows) if rows else "- (no example_inputs(); take the sizes from the code)"


def _task_text(task: Task) -> str:
    if task.mode == "full" or task.base is None:
        return prompts.read("task_full").strip()
    regions = "\n".join(f"- {item}" for item in task.base.unsupported) or "- (none listed)"
    frontend_ir = ""
    if task.base.program is not None and task.base.program.ops:
        frontend_ir = ("\nThe frontend's IR for what it could read:\n```vir\n" + print_program(task.base.program)
                       + "```")
    return prompts.render("task_auto", regions=regions, frontend_ir=frontend_ir).strip()


def task_prompt(task: Task) -> str:
    entry = task.facts.entry or (task.base.entry if task.base else None) or "(the one that uses torch.distributed)"
    mesh = ", ".join(f"{name}={size}" for name, size in task.mesh.dims)
    return prompts.render("translate", entry=entry, path=task.path, mesh=mesh, inputs=_inputs(task),
                          task=_task_text(task), source=numbered(task.source))


def initial_messages(task: Task, response_format: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system_prompt(response_format)},
            {"role": "user", "content": task_prompt(task)}]
