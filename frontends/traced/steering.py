"""Selections that steer the path are taken as the recorded run computed them.

Code that routes by value (a mixture of experts: ``choice = scores.argmax(-1)``, then
``torch.bincount(choice)`` read into Python as the split sizes of an all-to-all) runs one path per
routing: the recording holds the sizes and indices of the recorded one.  Its proof over every input
cannot hold, and a random input routes elsewhere (the model then computes with the recorded sizes
where torch would not: a difference that is no violation).  When a selection's indices (argmax,
argmin, max/min over a dim, topk, sort) reach a value the code reads into Python, every later use of
them reads the indices the recorded run selected (a leaf pinned to those numbers, per run): what is
proven then holds for every input that selects as the recorded inputs did, and the verdict says so.
A selection whose values only flow on as tensors keeps its model (a vocab-parallel argmax is proven
for every input)."""
from __future__ import annotations

from typing import Any

from verifier.ir import TensorSpec

from .recorder import Recording


def pinned_selections(recording: Recording, tag: str = ""
                      ) -> tuple[dict[str, str], list[TensorSpec], dict[str, Any], list[str]]:
    """(steering selection -> the leaf its later uses read, those leaves, their numbers, the sentences
    to state).  ``tag``: the run's suffix of the leaf names (``@rank1``; none for the single-device
    run), so each run reads its own selection."""
    renamed: dict[str, str] = {}
    leaves: list[TensorSpec] = []
    numbers: dict[str, Any] = {}
    sentences: list[str] = []
    for name, read_line in recording.steering.items():
        values, dtype, span, occurrence = recording.selections[name]
        leaf = f"selected_L{span.line}_{occurrence}{tag}"
        renamed[name] = leaf
        leaves.append(TensorSpec(leaf, tuple(values.shape), dtype, (), span))
        numbers[leaf] = values
        sentences.append(f"line {span.line} selects by value and line {read_line} reads what it selected into "
                         f"Python: the selection is taken as the recorded run made it, so what is proven holds for "
                         f"the inputs that select as the recorded ones did")
    return renamed, leaves, numbers, sentences
