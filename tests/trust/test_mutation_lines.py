"""The mutation campaign judges a found bug's line against where the mutation is in the file the
tool reads (benchmarks/mutate.py ``_mutated_lines``): the operator's site and the lines its edit wrote."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import mutate  # noqa: E402

ORIGINAL = "def f(x):\n    y = x * 2\n    dist.all_reduce(y)\n    return y\n"


def _recorded(line: int, mutated: str) -> mutate.Recorded:
    return mutate.Recorded("f.py", "op", line, "change", "digest", False, mutate._diff(ORIGINAL, mutated))


def test_an_inserted_statement_is_judged_at_its_own_line_below_the_site():
    inserted = ORIGINAL.replace("    return y\n", "    y.div_(2)\n    return y\n")
    assert mutate._mutated_lines(_recorded(3, inserted)) == {3, 4}


def test_a_rewritten_line_is_the_site_only():
    rewritten = ORIGINAL.replace("all_reduce(y)", "all_reduce(y, op=MAX)")
    assert mutate._mutated_lines(_recorded(3, rewritten)) == {3}


def test_a_dropped_line_leaves_only_the_site():
    dropped = ORIGINAL.replace("    dist.all_reduce(y)\n", "")
    assert mutate._mutated_lines(_recorded(3, dropped)) == {3}


def test_a_library_mutant_recorded_by_an_earlier_run_keeps_its_library_file():
    record = mutate.Recorded("pkg/mappings.py via driver.py", "op", 3, "change", "d", True, "")
    assert record.file == "pkg/mappings.py"
    assert mutate._names(record, 3, "lib/pkg/mappings.py") and not mutate._names(record, 3, None)


def _gallery_drop(origin: str, line: int, operator: str = "drop_collective") -> mutate.Recorded:
    original = (REPO / origin).read_text()
    lines = original.splitlines(True)
    mutated = "".join(lines[:line - 1]) + "    pass\n" + "".join(lines[line:])
    return mutate.Recorded(origin, operator, line, "removed", "d", False, mutate._diff(original, mutated))


def test_a_removed_collective_statement_is_also_judged_after_the_statement_before_it():
    # the repair for a removed call inserts it after the line before (a patch's first changed line there)
    record = _gallery_drop("examples/models/dist_layernorm_allreduce_stats_ok.py", 24)
    assert mutate._mutated_lines(record) == {23, 24}


def test_only_a_removed_collective_statement_gets_the_line_before():
    record = _gallery_drop("examples/models/dist_layernorm_allreduce_stats_ok.py", 24, operator="remove_wait")
    assert mutate._mutated_lines(record) == {24}


def test_a_removed_statement_that_opens_its_block_has_no_line_before():
    record = _gallery_drop("examples/models/dist_layernorm_allreduce_stats_ok.py", 21)
    assert mutate._mutated_lines(record) == {21}
