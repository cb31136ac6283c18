"""Every example under examples/temporal gets the verdict its first line promises."""
from pathlib import Path

import pytest

from verifier.report import Report
from verifier.temporal import analyse_program, analyse_schedule, parse_schedule
from verifier.text_format import parse_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "temporal"
ANALYSERS = {
    ".vir": lambda text, name: analyse_program(parse_program(text, name)),
    ".schedule": lambda text, name: analyse_schedule(parse_schedule(text)),
}


def examples() -> list[Path]:
    return sorted(path for path in EXAMPLES.iterdir() if path.suffix in ANALYSERS)


def test_every_class_has_a_correct_and_a_buggy_example():
    expected = {(path.name.split("_")[0], path.read_text().splitlines()[0]) for path in examples()}
    for kind in ("async", "p2p", "collectives", "pipeline"):
        assert (kind, "# expected: verified") in expected and (kind, "# expected: violations") in expected, kind


@pytest.mark.parametrize("path", examples(), ids=lambda path: path.name)
def test_example_verdict_matches_its_expected_line(path):
    text = path.read_text()
    expected = text.splitlines()[0].removeprefix("# expected:").strip()
    result = ANALYSERS[path.suffix](text, path.name)
    report = Report(path.name, {}, result.diagnostics, proven=result.proven)
    assert report.verdict == expected, [(d.check, d.line, d.message) for d in result.diagnostics]
    assert all(d.line is not None for d in result.diagnostics)
