"""Integer bit operations in a lifted kernel: shifts, masks and reinterprets run on the integers
the run knows (a tensor read as bits is sampled, as the reference gets it), with the meaning
TIR and the compiled C agree on; a result they would disagree on, or bits of a value that is
not a known integer, stay unsupported.

The kernels are one-line mutants of examples/kernels/int4_unpack_scale.py, lifted in one batch.
"""
from __future__ import annotations

import pytest
import z3
from lifter_helpers import EXAMPLES, lift_files, line_of

KERNEL = "int4_unpack_scale.py"
MASK, SHIFT = '& tirx.const(15, "uint8")', '* tirx.const(4, "uint8"))'
MUTANTS = {
    "wrong_mask.py": (MASK, '& tirx.const(7, "uint8")'),  # drops the nibble's top bit: the sign
    "wrong_shift.py": (SHIFT, '* tirx.const(3, "uint8"))'),  # the high nibble read from bit 3
    "unmasked.py": (MASK, ""),  # (byte >> s) << 4 overflows uint8: C and TIR disagree
    "float_bits.py": ('T.Cast("uint8", j % 2)', 'T.Cast("uint8", tirx.reinterpret("uint32", S_shared[i]) % 2)'),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    source = (EXAMPLES / KERNEL).read_text()
    files = {KERNEL: source}
    for name, (before, after) in MUTANTS.items():
        assert before in source, before
        files[name] = source.replace(before, after, 1)
    return lift_files(tmp_path_factory.mktemp("bits"), files)


def _only(report, check):
    found = [d for d in report.diagnostics if d.check == check]
    assert found, [(d.check, d.message) for d in report.diagnostics]
    return found[0]


@pytest.mark.tilelang
def test_unpacking_signed_nibbles_is_verified_for_the_sampled_bytes(reports):
    report = reports[KERNEL]
    assert report.verdict == "verified", [(d.check, d.message) for d in report.diagnostics]
    assert any("B (uint8, read as bits) fixed to one sampled value" in p for p in report.proven), report.proven


@pytest.mark.tilelang
@pytest.mark.parametrize("name", ["wrong_mask.py", "wrong_shift.py"])
def test_a_wrong_mask_or_shift_is_a_violation_at_its_line(reports, name):
    report = reports[name]
    assert report.verdict == "violations"
    found = _only(report, "spec")
    assert found.line == line_of(str(EXAMPLES / KERNEL), "C_local[i, j] = T.Cast")
    assert found.counterexample is not None and found.counterexample.confirmed


@pytest.mark.tilelang
def test_a_narrow_shift_that_overflows_is_unsupported(reports):
    found = _only(reports["unmasked.py"], "unsupported")
    assert "outside uint8 (0..255)" in found.message and "wider type" in found.message, found.message


@pytest.mark.tilelang
def test_the_bits_of_a_float_are_unsupported(reports):
    found = _only(reports["float_bits.py"], "unsupported")
    assert "reinterpret of float32 as uint32 is not modelled" in found.message, found.message


def test_typed_bit_operations_and_reinterpret():
    from tir_lifter.bits import bit_operation, reinterpret
    assert reinterpret(240, "uint8", "int8", None) == -16
    assert bit_operation("shift_right", [-16, 4], "int8", None) == -1  # arithmetic: the sign extends
    assert reinterpret(0x3C00, "uint16", "float16", None) == 1.0
    assert reinterpret(0x3F80, "uint16", "bfloat16", None) == 1.0
    assert reinterpret(-1, "int32", "uint32", None) == 2 ** 32 - 1
    assert bit_operation("bitwise_xor", [-1, 5], "int8", None) == -6


@pytest.mark.parametrize("name,values,dtype", [("shift_left", [16, 4], "uint8"), ("bitwise_not", [5], "uint8"),
                                               ("shift_left", [1, 8], "uint8"), ("shift_right", [1, -1], "int32")])
def test_results_c_and_tir_disagree_on_are_refused(name, values, dtype):
    from tir_lifter.bits import bit_operation
    from tir_lifter.errors import Unsupported
    with pytest.raises(Unsupported):
        bit_operation(name, values, dtype, None)


def test_truncating_an_integer_by_construction_is_the_integer_itself():
    from verifier.backends import Z3Backend
    a, b = z3.Int("a"), z3.Int("b")
    total = z3.ToReal(a) * 3 - z3.ToReal(b) + 2
    truncated = Z3Backend().cast([total], "i64")[0]
    assert z3.is_int(truncated) and "to_int" not in truncated.sexpr()
    solver = z3.Solver()
    solver.add(truncated != 3 * a - b + 2)
    assert solver.check() == z3.unsat
    halved = Z3Backend().cast([total / 2], "i64")[0]
    assert "to_int" in halved.sexpr()  # not an integer by construction: the truncation stays


def test_a_known_integer_converted_to_a_narrow_float_is_rounded_as_the_hardware_does():
    from tir_lifter.interpreter import _convert_index
    assert _convert_index(2049, "float16") == 2048.0 and _convert_index(255, "float16") == 255
    assert _convert_index(2 ** 24 + 1, "float32") == 2.0 ** 24 and _convert_index(500, "float8_e4m3fn") == 448.0


def test_the_reference_recorder_folds_integer_ops_on_constants_and_keeps_float_arithmetic():
    torch = pytest.importorskip("torch")
    from frontends.traced.recorder import Recorder
    from frontends.traced.spans import SpanFinder
    recorder = Recorder(SpanFinder(__file__, __file__), simulated=False, fold_constants=True)
    packed = torch.tensor([[0x8F, 0x71]] * 40, dtype=torch.uint8)  # 80 bytes: more than a small constant
    with torch.no_grad(), recorder:
        signed = ((packed & 15).to(torch.int8) << 4) >> 4  # int8 wraps: torch's value, not x * 16 // 16
        (signed.to(torch.float32) / 3).sum()
    kinds = [op.kind for op in recorder.recording.ops]
    assert not any("shift" in k or "bitwise" in k or "_to_copy" in k for k in kinds), kinds
    assert "aten.div.Tensor" in kinds and not recorder.recording.fingerprints  # spelled out, no unknown leaf
    values = [op.attrs["s"] for op in recorder.recording.ops if op.kind == "aten.scalar_tensor.default"]
    # 0x8F's low nibble 15 is -1 as a signed int4: in the int8 result and in its float32 conversion
    assert sum(v == -1 and isinstance(v, int) for v in values) == 40 and sum(v == -1.0 for v in values) == 80
