"""Rank symmetry: programs that read an outer coordinate are split into coordinate classes."""
import pytest

from verifier.ir import Mesh
from verifier.scale.builder import ProgramBuilder
from verifier.scale.symmetry import SymmetryError, specialise

PLAN_MESH = Mesh((("pp", 2), ("dp", 4), ("tp", 2)))


def block(when=None, rank=False, collective_dim="tp"):
    b = ProgramBuilder(Mesh((("tp", 2),)), {"S": 4, "H": 2})
    x = b.input("x", ["S", "H"], {"tp": "S(0)"})
    full = b.op("full", "all_gather", x, mesh_dim=collective_dim, dim=0)
    attrs = {"when": when} if when else {}
    y = b.op("y", "mul", full, scalar=2.0, **attrs)
    if rank:
        b.op("r", "rank", mesh_dim="dp")
    b.output(y)
    return b.build()


def test_program_that_reads_no_outer_coordinate_is_one_class():
    ((coordinate, program),) = specialise(block(), PLAN_MESH)
    assert coordinate.everywhere and coordinate.describe() == "every rank"


def test_predicate_on_an_outer_dim_splits_its_values_into_classes():
    classes = specialise(block(when="not (dp == 3)"), PLAN_MESH)
    by_size = sorted(classes, key=lambda pair: len(pair[0].members))
    (odd, odd_program), (rest, rest_program) = by_size
    assert odd.members == ((3,),) and odd.describe() == "dp=3"
    assert len(rest.members) == 3 and rest.dims == ("dp",)
    assert [op.kind for op in rest_program.ops] == ["all_gather", "mul"] and "when" not in rest_program.ops[1].attrs
    assert [op.kind for op in odd_program.ops] == ["all_gather"]
    assert odd_program.outputs[0].name == odd_program.ops[0].results[0]  # y aliases its first argument
    assert "does not run here" in odd.changes[0]


def test_predicate_mixing_inner_and_outer_dims_keeps_its_inner_part():
    classes = specialise(block(when="dp == 1 and tp == 0"), PLAN_MESH)
    predicates = {op.attrs.get("when") for _, program in classes for op in program.ops}
    assert "1 == 1 and tp == 0" in predicates


def test_rank_of_an_outer_dim_becomes_a_constant_per_coordinate():
    classes = specialise(block(rank=True), PLAN_MESH)
    assert len(classes) == 4
    values = sorted(next(op for op in program.ops if op.kind == "const").attrs["value"] for _, program in classes)
    assert values == [0, 1, 2, 3]


def test_collective_over_an_outer_dim_is_rejected():
    with pytest.raises(SymmetryError, match="not in the block's mesh"):
        specialise(block(collective_dim="dp"), PLAN_MESH)
