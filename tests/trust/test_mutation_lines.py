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


def test_a_line_below_an_inserted_statement_moves_down_and_a_rewritten_line_has_no_place():
    inserted = ORIGINAL.replace("    return y\n", "    y.div_(2)\n    return y\n")
    diff = mutate._diff(ORIGINAL, inserted)
    assert [mutate._moved_line(diff, line) for line in (2, 3, 4)] == [2, 3, 5]
    rewritten = mutate._diff(ORIGINAL, ORIGINAL.replace("x * 2", "x * 3"))
    assert mutate._moved_line(rewritten, 2) is None and mutate._moved_line(rewritten, 4) == 4
    dropped = mutate._diff(ORIGINAL, ORIGINAL.replace("    dist.all_reduce(y)\n", ""))
    assert mutate._moved_line(dropped, 4) == 3


def test_every_file_with_a_bug_of_its_own_records_the_bug_lines_on_code():
    for folder in ("examples/models", "examples/realworld"):
        for info in [o for o in mutate.originals(None) if o.expected == "violations" and folder in o.label]:
            source = info.path.read_text().splitlines()
            assert info.bug_lines, info.label
            for line in info.bug_lines:
                text = source[line - 1].strip()
                assert text and not text.startswith(("#", '"""')), (info.label, line)


def _found(origin: str, line: int, operator: str, mutated: str, original: str, tool_line: int) -> mutate.Outcome:
    record = mutate.Recorded(origin, operator, line, "change", "d", False, mutate._diff(original, mutated))
    verdict = mutate.tool.ToolVerdict(mutate.tool.VIOLATIONS, 1, 1.0, "", (tool_line,), (), (None,))
    return mutate.Outcome(record, mutate.gt.Truth(mutate.gt.DIFFER, "outputs differ"), verdict)


def test_a_mutant_of_a_buggy_file_named_at_the_files_own_bug_counts_apart_from_the_strict_figure():
    origin = "examples/models/dist_rowparallel_sum_divided_by_world.py"   # its own bug: `return y / world`, 24
    original = (REPO / origin).read_text()
    assert original.splitlines()[23].strip() == "return y / world"
    # a statement inserted above the bug moves it to line 25; the tool naming 25 names the file's own bug
    mutated = original.replace("    dist.all_reduce(y, op=dist.ReduceOp.SUM)\n",
                               "    dist.all_reduce(y, op=dist.ReduceOp.SUM)\n    y = y * 1.0\n")
    known = {o.label: o.bug_lines for o in mutate.originals(None) if o.bug_lines}
    own_bug, elsewhere = (_found(origin, 23, "op", mutated, original, line) for line in (25, 21))
    assert mutate.own_bug_lines(own_bug.mutant, known) == {25}
    assert mutate.all_hits([own_bug, elsewhere]) == (0, 2)
    assert mutate.own_bug_hits([own_bug, elsewhere], known) == (1, 2)
    # a file without a bug of its own gains nothing
    ok = "examples/models/dist_rowparallel_ok.py"
    assert mutate.own_bug_lines(_found(ok, 18, "op", original, original, 24).mutant, known) == frozenset()


def test_a_duplicated_collective_is_judged_at_both_of_its_identical_copies():
    # the copy goes below the site, but a diff of two identical lines shows the insertion at the site itself
    duplicated = ORIGINAL.replace("    dist.all_reduce(y)\n", "    dist.all_reduce(y)\n    dist.all_reduce(y)\n")
    record = mutate.Recorded("f.py", "duplicate_collective", 3, "twice", "d", False, mutate._diff(ORIGINAL, duplicated))
    assert mutate._mutated_lines(record) == {3, 4}
    above = mutate.Recorded("f.py", "duplicate_collective", 3, "twice", "d", False,
                            "@@ -2,0 +3 @@\n+    dist.all_reduce(y)\n")   # as a diff of a library file showed it
    assert mutate._changed_lines(above.diff) == {3} and mutate._mutated_lines(above) == {3, 4}
    other = mutate.Recorded("f.py", "move_collective", 3, "x", "d", False, above.diff)
    assert mutate._mutated_lines(other) == {3}    # only a duplicate's insertion is a copy of the site


def test_a_removed_collective_can_go_back_anywhere_after_the_statement_that_made_its_operand():
    # all_reduce(sum_exp) removed at 31: inserted after 28 (where sum_exp is made), 29 or 30, the program is the same
    record = _gallery_drop("examples/realworld/vocab_parallel_cross_entropy_label_smoothing.py", 31)
    assert "sum_exp = " in (REPO / record.origin).read_text().splitlines()[27]
    assert mutate._mutated_lines(record) == {28, 29, 30, 31}


def test_two_swapped_point_to_point_calls_are_judged_at_both_lines():
    # a diff shows the swap as one call moved past the other, naming only the moved call's new line
    original = "def f(a, b):\n    dist.isend(a, dst=1)\n    dist.irecv(b, src=1)\n    return b\n"
    swapped = "def f(a, b):\n    dist.irecv(b, src=1)\n    dist.isend(a, dst=1)\n    return b\n"
    diff = mutate._diff(original, swapped)
    assert mutate._changed_lines(diff) == {2}
    record = mutate.Recorded("f.py", "swap_send_recv", 2, "two point-to-point calls swapped", "d", False, diff)
    assert mutate._mutated_lines(record) == {2, 3}
    moved = mutate.Recorded("f.py", "move_collective", 2, "x", "d", False, diff)
    assert mutate._mutated_lines(moved) == {2}    # only a swap of two calls is both calls' mutation
