"""Installed library code, as it ships, against gloo ground truth (benchmarks/realcode.py's entries).

A reshard (megatron-core's ``all_to_all_sp2hp``: sequence-sharded in, hidden-sharded out) is checked
as one with ``--expect``: verified as shipped; with its all-to-all dropped (a linked copy of the
package, one line changed) the ranks differ from one device and the tool names that line (the exchange missing there).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.realcode
pytest.importorskip("torch")
pytest.importorskip("megatron.core")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import realcode  # noqa: E402
import realcode_entries as entries  # noqa: E402
import realcode_mutants as mutants  # noqa: E402

SP2HP = "megatron-core:megatron.core.tensor_parallel.mappings.all_to_all_sp2hp"
TIMEOUT = 240.0


def _truth(key: str, **kw):
    return realcode.ground_truths([entries.by_key(key)], 60.0, **kw)[key]


def test_reshard_as_shipped_is_verified_and_agrees_with_gloo():
    entry = entries.by_key(SP2HP)
    assert _truth(SP2HP).status == "agree"
    result = realcode.run_tool(entry, TIMEOUT)
    assert result["verdict"] == "verified", result["reasons"]


def test_reshard_with_its_all_to_all_dropped_is_a_violation_at_that_line(tmp_path):
    mutant = next(m for m in mutants.MUTANTS if m.entry == SP2HP)
    entry = entries.by_key(SP2HP)
    mutants.materialize(mutant, tmp_path, entry.module)
    truth = _truth(SP2HP, extra_path=str(tmp_path), hash_salt="_test_sp2hp_dropped")
    assert truth.status == "differ"
    target = tmp_path / "megatron" / "core" / "tensor_parallel" / "mappings.py"
    result = realcode.run_tool(entry, TIMEOUT, target=str(target), extra=("--path", str(tmp_path)))
    assert result["verdict"] == "violations", result["reasons"]
    # ``output = concat_tensor`` bound the un-exchanged blocks: the exchange belongs at that line
    assert any(line == mutant.line and "a missing exchange of blocks" in message
               for line, message in result["violations"]), result["violations"]


def test_a_block_the_rank_does_not_return_is_a_violation():
    """``--expect out=Shard(0)`` where the rank returns its block of dim 1: the stated reshard is wrong."""
    entry = entries.by_key(SP2HP)
    result = realcode.run_tool(entry, TIMEOUT, extra=("--expect", "out=Shard(0)"))
    assert result["verdict"] == "violations"
    assert any("--expect out=Shard(0)" in message for _, message in result["violations"])
