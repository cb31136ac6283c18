"""Prompt templates for the LLM path, as versioned text files shipped as package data.

Why text files: a prompt change is a reviewable diff of prose, and ``PROMPT_VERSION`` is part
of the response cache key, so a new version never replays answers to old prompts.  Bump it
(and add ``*_v2.txt`` files) whenever a template's meaning changes.

Templates use ``string.Template`` placeholders (``$name``) so JSON braces need no escaping.
``examples/`` holds few-shot pairs (``NAME.py`` + ``NAME.vir``); the agent prints them with
the IR's own printer when it builds a prompt, so they cannot drift from the IR.
``ir.schema.json`` is the published JSON schema of the IR (``python -m agent.ir_json``).
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from string import Template

PROMPT_VERSION = "v1"


def read(name: str, version: str = PROMPT_VERSION) -> str:
    """The text of template ``name`` (e.g. ``"translate"``) at ``version``."""
    return resources.files(__name__).joinpath(f"{name}_{version}.txt").read_text(encoding="utf-8")


def render(name: str, version: str = PROMPT_VERSION, **values: str) -> str:
    """Fill template ``name``; a missing placeholder is an error, not a silent ``$name``."""
    return Template(read(name, version)).substitute(values)


@dataclass(frozen=True)
class ExamplePair:
    """A few-shot example: a source file and its faithful IR (``.vir`` text as stored)."""

    name: str
    source: str
    ir_text: str


def example_pairs() -> list[ExamplePair]:
    folder = resources.files(__name__).joinpath("examples")
    pairs = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".py"):
            stem = entry.name[:-3]
            ir = folder.joinpath(stem + ".vir")
            if ir.is_file():
                pairs.append(ExamplePair(stem, entry.read_text(encoding="utf-8"), ir.read_text(encoding="utf-8")))
    return pairs


def schema_text() -> str:
    """The published IR schema as stored (the agent builds the live one from ``agent.ir_json``)."""
    return resources.files(__name__).joinpath("ir.schema.json").read_text(encoding="utf-8")
