"""Helpers for the frontend tests: translate a snippet, find its ops and lines."""
from __future__ import annotations

import textwrap

from frontends import translate_source
from frontends.base import Translation
from verifier.ir import Op

HEADER_EXPLICIT = """\
import torch
import torch.distributed as dist
import torch.nn.functional as F
"""


def explicit(body: str) -> str:
    """A file in the explicit style: the usual imports, then ``body`` (dedented)."""
    return HEADER_EXPLICIT + source_of(body)


def source_of(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def translate(text: str, path: str = "model.py", **options) -> Translation:
    return translate_source(source_of(text), path, **options)


def complete(text: str, path: str = "model.py", **options) -> Translation:
    """Translate and insist that everything was read."""
    translation = translate(text, path, **options)
    assert translation.unsupported == [] and translation.program is not None, translation.unsupported
    return translation


def ops(translation: Translation, kind: str | None = None) -> list[Op]:
    return [op for op in translation.program.ops if kind is None or op.kind == kind]


def only(translation: Translation, kind: str) -> Op:
    found = ops(translation, kind)
    assert len(found) == 1, [f"{op.kind}{op.attrs} at {op.span.line}" for op in translation.program.ops]
    return found[0]


def kinds(translation: Translation) -> list[str]:
    return [op.kind for op in translation.program.ops]


def line_of(text: str, fragment: str) -> int:
    """1-based line of the first line of the (dedented) source containing ``fragment``."""
    for number, line in enumerate(source_of(text).splitlines(), start=1):
        if fragment in line:
            return number
    raise AssertionError(f"{fragment!r} not in the source")


def input_spec(translation: Translation, name: str):
    return next(spec for spec in translation.program.inputs if spec.name == name)
