"""The .vir text form: printing and parsing round-trip; errors name line and column."""
from pathlib import Path

import pytest

from verifier.text_format import ParseError, parse_program, print_program

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").rglob("*.vir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_round_trips(path):
    program = parse_program(path.read_text(), str(path))
    assert parse_program(print_program(program), str(path)) == program


def test_round_trip_keeps_attributes_spans_bounds_and_ops_without_results():
    text = (
        "mesh dp=2, tp=2\n"
        "dim S=4, H\n"
        "require H % 4 == 0\n"
        "input ids: i64[S] {tp: R} range(0, H) at 3\n"
        "input x: f32[S, H] {dp: S(0), tp: P(max)}\n"
        "a, b = chunk(x, chunks=2, dim=1) at 7\n"
        "r = reshape(a, shape=[S, -1, H/tp_size]) at 8\n"
        'y = all_reduce(b, mesh_dim=tp, op=max, when="tp == 0", handle=h1) at 9\n'
        "wait(handle=h1) at 10\n"
        "send(y, peer=(tp+1)%tp_size, mesh_dim=tp) at 11\n"
        "output y {dp: S(0)}\n"
    )
    program = parse_program(text, "t.vir")
    assert [op.kind for op in program.ops] == ["chunk", "reshape", "all_reduce", "wait", "send"]
    assert program.ops[2].attrs == {"mesh_dim": "tp", "op": "max", "when": "tp == 0", "handle": "h1"}
    assert program.ops[4].results == () and program.ops[4].span.line == 11
    assert program.inputs[0].bounds == (0, "H")
    assert parse_program(print_program(program), "t.vir") == program


@pytest.mark.parametrize("text, where, expected", [
    ("mesh tp=2\ny = matmul(x w)\n", "2:14", "expected ',' or ')'"),
    ("mesh tp=x\n", "1:9", "expected a mesh dim size"),
    ("mesh tp=2\ninput x: f32[4] {pp: R}\n", "2:18", "expected a mesh dim (tp)"),
    ("mesh tp=2\ninput x: f32[4] {tp: Q}\n", "2:22", "expected a placement"),
    ("input x: f32[2]\n", "1:16", "expected a 'mesh' line"),
    ("mesh tp=2\ny = f(x, a=$)\n", "2:12", "expected a token"),
    ("", "1:1", "expected a 'mesh' line"),
])
def test_parse_errors_name_line_and_column(text, where, expected):
    with pytest.raises(ParseError) as error:
        parse_program(text, "bad.vir")
    assert str(error.value).startswith(f"bad.vir:{where}: {expected}")
