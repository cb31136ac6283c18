"""The TileLang path of ``lift``: the file runs in a child, TileLang builds every kernel it
asks for at reduced distinct tile sizes, and each kernel is checked against its own spec.

All files go through one elaboration child (``run_batch``: TileLang and torch are imported
once), so the module costs one child start plus the checks.
"""
from __future__ import annotations

import re

import pytest

from lifter_helpers import EXAMPLES

pytestmark = pytest.mark.tilelang


def _mutate(name: str, old: str, new: str, count: int = 1, *more: tuple[str, str]) -> str:
    """The bundled kernel ``name`` with ``old`` replaced by ``new`` (and each further pair)."""
    source = (EXAMPLES / name).read_text()
    for before, after in ((old, new),) + more:
        assert before in source, f"{before!r} not in {name}"
        source = source.replace(before, after, count)
    return source


MUTANTS = {
    # tile-size mix-up: the K offset of A's tile uses block_N
    "mix_up.py": _mutate("eager_gemm.py", "T.copy(A[by * block_M, ko * block_K], A_tile)",
                         "T.copy(A[by * block_M, ko * block_N], A_tile)"),
    "no_clear.py": _mutate("eager_gemm.py", "T.clear(acc)", "pass"),
    # N=72 is not a multiple of block_N=32: a floor-division grid leaves the last columns unwritten
    "floor_grid.py": _mutate("eager_elementwise.py", "T.Kernel(T.ceildiv(N, block_N)", "T.Kernel(N // block_N"),
    "plain_splitk.py": _mutate("eager_splitk.py", "T.atomic_add(C[by * block_M + i, bx * block_N + j], acc[i, j])",
                               "C[by * block_M + i, bx * block_N + j] = acc[i, j]"),
    "causal_bound.py": _mutate("causal_tril.py", "bx * block_N + j <= by * block_M + i",
                               "bx * block_N + j < by * block_M + i"),
    "swapped_blocks.py": _mutate("eager_gemm_bt.py", "T.copy(acc, C[by * block_M, bx * block_N])",
                                 "T.copy(acc, C[bx * block_M, by * block_N])"),
    "unassociated.py": _mutate("multi_kernel.py", "def ref_copy_transpose(A):", "def ref_other(A):"),
    # the row length and the row tile are both reduced: they must not be reduced to one value
    "tile_for_size.py": _mutate("eager_rms_rows.py", "total[i] / N + eps", "total[i] / blk_m + eps"),
    "wrong_scale.py": _mutate("profiler_scaled_gemm.py", "acc[i, j] * alpha", "acc[i, j] * alpha * alpha"),
    # the guard compares the row with the column count: rows past N are never written when M > N
    "dynamic_swapped_guard.py": _mutate("dynamic_axpy.py", "if row < M and col < N:", "if row < N and col < N:"),
    "dynamic_floor_grid.py": _mutate("dynamic_axpy.py", "T.Kernel(T.ceildiv(N, block_N)", "T.Kernel(N // block_N"),
    # A's tile is shaped with block_N where block_K is meant; the call makes them equal (16), so
    # TileLang refuses distinct reduced tiles (gemm K mismatch) and the two are reduced alike
    "tiles_equal_in_the_call.py": _mutate(
        "eager_gemm.py", "A_tile = T.alloc_shared((block_M, block_K), dtype)",
        "A_tile = T.alloc_shared((block_M, block_N), dtype)").replace("block_N=32, block_K=16",
                                                                     "block_N=16, block_K=16"),
    # the row's log-sum-exp taken with the natural log where exp2 needs log2
    "softmax_natural_log.py": _mutate("two_pass_softmax.py", "T.log2(row_sum[i])", "T.log(row_sum[i])"),
    # online softmax without rescaling the partial output by exp2(old max - new max)
    "attention_no_rescale.py": _mutate("flash_attention_causal.py", "acc[i, j] *= rescale[i]", "acc[i, j] *= 1.0"),
    # the diagonal masked: the first query sees no key, its row is -inf - -inf = NaN
    "attention_mask_bound.py": _mutate("flash_attention_causal.py", "bq * block_M + i >= kt * block_N + j",
                                       "bq * block_M + i > kt * block_N + j"),
    # the band's two conditions joined by | where & is meant: keys far before the query are kept
    "band_or.py": _mutate("banded_parity_mask.py", "keep = (col <= row) & (row - col < band)",
                          "keep = (col <= row) | (row - col < band)"),
    # the key parity read from bit 0 where bit 1 is meant
    "parity_bit.py": _mutate("banded_parity_mask.py", "keep = (col <= row) & (row - col < band) & (((col >> 1) & 1) == 0)",
                             "keep = (col <= row) & (row - col < band) & (((col >> 0) & 1) == 0)"),
    # the image's padding left out of the patches (pad 0 where the output shape assumes pad)
    "conv_no_pad.py": _mutate("conv2d_im2col.py", "T.im2col(image, patch, bp, kt, taps, stride, 1, pad)",
                              "T.im2col(image, patch, bp, kt, taps, stride, 1, 0)"),
    # the filter rows of a K step taken with the N tile
    "conv_filter_tile.py": _mutate("conv2d_im2col.py", "T.copy(filters_2d[kt * block_K, bf * block_N], weight)",
                                   "T.copy(filters_2d[kt * block_N, bf * block_N], weight)"),
    # dilation 2 where the reference convolves densely
    "conv_dilated.py": _mutate("conv2d_im2col.py", "T.im2col(image, patch, bp, kt, taps, stride, 1, pad)",
                               "T.im2col(image, patch, bp, kt, taps, stride, 2, pad)"),
    # the output's memory read as float32 elements: a reinterpretation, not a view
    "conv_view_dtype.py": _mutate("conv2d_im2col.py", "out_2d = T.Tensor((batch * out_h * out_w, features), dtype,",
                                  "out_2d = T.Tensor((batch * out_h * out_w, features), accum_dtype,"),
    # the function the file compares with reads A only: not the kernel's reference (it reads B too)
    "reference_of_some_inputs.py": _mutate("eager_elementwise.py", "def ref_program(A, B):\n    return A + B * 2",
                                           "def tripled(A):\n    return A * 3", 1,
                                           ("ref_program(a, b))", "tripled(a))")),
    # multiplied by the row sum where divided
    "module_sizes_times.py": _mutate("module_sizes_rows.py", "tile[i, j] = tile[i, j] / total[i]",
                                     "tile[i, j] = tile[i, j] * total[i]"),
    # the mask read with the block indices swapped
    "mask_swapped.py": _mutate("block_sparse_gemm.py", "if Mask[by, bx, ko]:", "if Mask[bx, by, ko]:"),
    # the mask's K block fixed at the first
    "mask_first_k.py": _mutate("block_sparse_gemm.py", "if Mask[by, bx, ko]:", "if Mask[by, bx, 0]:"),
    # the rows shifted by their minimum: differs from the inline expected value
    "inline_min_shift.py": _mutate("inline_checked_row_shift.py", "T.reduce_max(tile, row_max", "T.reduce_min(tile, row_max"),
    # the expected value changed in place after it was computed: what made it is no longer its value
    "inline_changed_in_place.py": _mutate("inline_checked_row_shift.py", "    torch.testing.assert_close(y, expected)",
                                          "    expected[0, 0] = 0.0\n    torch.testing.assert_close(y, expected)"),
    # ... changed through a view of it
    "inline_view_changed.py": _mutate("inline_checked_row_shift.py", "    torch.testing.assert_close(y, expected)",
                                      "    expected.view(-1)[0] = 0.0\n    torch.testing.assert_close(y, expected)"),
    # the kernel's output changed in place before the file compares it
    "inline_output_changed.py": _mutate("inline_checked_row_shift.py",
                                        "    expected = x - x.max(dim=1, keepdim=True).values",
                                        "    y.add_(1.0)\n    expected = x - x.max(dim=1, keepdim=True).values + 1.0"),
    # the second launch adds all but the last split's partial sums
    "split_short_combine.py": _mutate("split_masked_row_sum.py", "for s in T.serial(num_split):",
                                      "for s in T.serial(num_split - 1):"),
    # every split writes the first column of the scratch: the others are read unwritten
    "split_one_column.py": _mutate("split_masked_row_sum.py", "partial[bm * block_M + i, bs] = total[i]",
                                   "partial[bm * block_M + i, 0] = total[i]"),
    "split_mask_inverted.py": _mutate("split_masked_row_sum.py", "keep[j] != 0", "keep[j] == 0"),
    # the file compares the kernel with both references: the dense one too
    "split_both_compared.py": _mutate(
        "split_masked_row_sum.py", "    torch.testing.assert_close(out, ref_program(x, mask), rtol=1e-4, atol=1e-4)\n",
        "    torch.testing.assert_close(out, ref_program(x, mask), rtol=1e-4, atol=1e-4)\n"
        "    torch.testing.assert_close(out, ref_dense(x, mask), rtol=1e-4, atol=1e-4)\n"),
    # ... with the masked one and one more that computes the same
    "split_two_right_references.py": _mutate(
        "split_masked_row_sum.py", "    torch.testing.assert_close(out, ref_program(x, mask), rtol=1e-4, atol=1e-4)\n",
        "    torch.testing.assert_close(out, ref_program(x, mask), rtol=1e-4, atol=1e-4)\n"
        "    torch.testing.assert_close(out, ref_where(x, mask), rtol=1e-4, atol=1e-4)\n", 1,
        ("def ref_dense(X, Mask):", "def ref_where(X, Mask):\n    return torch.where(Mask != 0, X, 0.0).sum(dim=-1)"
                                   "\n\n\ndef ref_dense(X, Mask):")),
    # the first launch zeroes the output the second launch then writes: ordered, not a conflict
    "split_out_zeroed_first.py": _mutate(
        "split_masked_row_sum.py", "                partial[bm * block_M + i, bs] = total[i]\n",
        "                partial[bm * block_M + i, bs] = total[i]\n            if bs == 0:\n"
        "                for i in T.Parallel(block_M):\n                    Out[bm * block_M + i] = 0\n"),
    # the tile offset without its tile size: at reduced sizes where gcd(N, blk_n) is 1, the same
    "gcd_tile_offset.py": _mutate("gcd_tile_rows.py", "T.copy(X[row, t * blk], tile)", "T.copy(X[row, t], tile)"),
    "bias_subtracted.py": _mutate("row_bias_view.py", " + b[bx * block_N + j]", " - b[bx * block_N + j]"),
    # the grid sized by a module-level value computed from M (half of it): reduced on its own, it
    # would cover every reduced row (this was verified); no faithful reduced instance exists
    "module_computed_grid.py": _mutate("module_sizes_rows.py", "M = 96\nN = 40\n", "M = 96\nN = 40\nROWS = M // 2\n", 1,
                                       ("T.Kernel(T.ceildiv(M, block_M)", "T.Kernel(T.ceildiv(ROWS, block_M)")),
    # the persistent loop strides one tile too far: a tile no program visits
    "while_stride_skips.py": _mutate("persistent_while_scale.py", "cursor[0] = cursor[0] + num_programs",
                                     "cursor[0] = cursor[0] + num_programs + 1"),
    # the K loop one tile short
    "k_tiles_short.py": _mutate("counted_k_tiles_gemm.py", "T.Pipelined(k_tiles, num_stages=2)",
                                "T.Pipelined(k_tiles - 1, num_stages=2)"),
    # M, N and K equal: the count is the tile count of each, which one is not known
    "k_tiles_ambiguous.py": _mutate("counted_k_tiles_gemm.py", "M, N, K = 256, 384, 512", "M, N, K = 512, 512, 512"),
    # the mask's value multiplies the data: a uint8 input, not a sampled mask
    "split_mask_multiplied.py": _mutate("split_masked_row_sum.py",
                                        "tile[i, j] = T.if_then_else(keep[j] != 0, tile[i, j], 0)",
                                        "tile[i, j] = tile[i, j] * keep[j]"),
    # the expected value reshaped with the real sizes: not replayable at reduced sizes
    "inline_real_sizes.py": _mutate("inline_checked_row_shift.py", "keepdim=True).values",
                                    "keepdim=True).values.reshape(M, 1)"),
}
ORIGINALS = ["eager_gemm.py", "eager_splitk.py", "eager_elementwise.py", "factory_row_max.py", "multi_kernel.py",
             "causal_tril.py", "eager_gemm_bt.py", "factory_splitk_relu.py", "profiler_scaled_gemm.py",
             "eager_rms_rows.py", "dynamic_axpy.py", "flash_attention_causal.py", "two_pass_softmax.py",
             "square_column_sum.py", "autotuned_gemm.py", "banded_parity_mask.py", "conv2d_im2col.py",
             "inline_checked_row_shift.py", "module_sizes_rows.py", "block_sparse_gemm.py",
             "chunk_sums.py", "split_masked_row_sum.py", "gcd_tile_rows.py", "row_bias_view.py",
             "persistent_while_scale.py", "counted_k_tiles_gemm.py"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    from tir_lifter.elaborate_run import report_from_json, run_batch
    folder = tmp_path_factory.mktemp("kernels")
    paths = {name: str(EXAMPLES / name) for name in ORIGINALS}
    for name, source in MUTANTS.items():
        (folder / name).write_text(source)
        paths[name] = str(folder / name)
    bodies = run_batch(list(paths.values()), timeout=1800.0)
    by_file = {body["file"]: body for body in bodies}
    out = {}
    for name, path in paths.items():
        body = by_file[path]
        assert "internal_error" not in body, body
        out[name] = report_from_json(body)
    return out


def _proof_of(report) -> str:
    """The proven lines of a report that must be verified."""
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    return " ".join(report.proven)


@pytest.mark.parametrize("name", ORIGINALS)
def test_bundled_kernels_in_upstream_styles_are_verified(reports, name):
    report = reports[name]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    assert report.extra["frontend"] == "tilelang"


def test_reduced_tile_sizes_are_distinct_and_named_with_their_real_values(reports):
    proven = " ".join(reports["eager_gemm.py"].proven)
    tiles = {name: int(value) for name, value in re.findall(r"(block_[MNK])=(\d+) \(from", proven)}
    assert set(tiles) == {"block_M", "block_N", "block_K"}
    assert len(set(tiles.values())) == 3 and min(tiles.values()) >= 2
    assert "M=" in proven and "(from 96)" in proven  # problem sizes reduced from the real call's


def test_every_kernel_of_a_file_is_checked_against_its_own_reference(reports):
    proven = reports["multi_kernel.py"].proven
    assert any(p.startswith("add_kernel:") and "ref_add_kernel" in p for p in proven)
    assert any(p.startswith("copy_transpose:") and "ref_copy_transpose" in p for p in proven)


def test_plain_factories_given_to_tilelang_compile_are_recorded_per_call(reports):
    proven = reports["factory_splitk_relu.py"].proven
    assert any(p.startswith("splitk_gemm:") and "C = A @ B" in p for p in proven)
    assert any(p.startswith("relu_kernel:") and "relu" in p for p in proven)


def test_autotuned_kernels_are_checked_per_config_and_as_called_with_their_tunables(reports):
    proven = [p for p in reports["autotuned_gemm.py"].proven if "kernel computes C = ref_program(A, B)" in p]
    tiles = {tuple(re.findall(r"block_[MNK]=\d+ \(from (\d+)\)", p)) for p in proven}
    # the two configurations, and the call that gives its tiles (TileLang does not tune that one)
    assert tiles == {("32", "32", "16"), ("64", "32", "32"), ("64", "32", "16")}


def test_tiles_equal_in_the_call_that_tilelang_needs_equal_are_reduced_alike(reports):
    proven = _proof_of(reports["tiles_equal_in_the_call.py"])
    assert "block_N=2 (from 16)" in proven and "block_K=2 (from 16)" in proven


def test_divisions_folded_by_equal_tiles_are_paired_with_the_tiles_reduced_alike(reports):
    proven = _proof_of(reports["square_column_sum.py"])
    assert "(from 96)" in proven and "unbound" not in proven  # the real tiling case is known
    assert "block_M=2 (from 32), block_N=2 (from 32)" in proven


def test_flash_attention_is_proven_by_the_algebra_of_exponentials_and_says_so(reports):
    proven = " ".join(reports["flash_attention_causal.py"].proven)
    assert "kernel computes O = ref_program(Q, K, V)" in proven and "e^(a+b) = e^a e^b" in proven


@pytest.mark.parametrize("name,check", [
    ("mix_up.py", "spec"), ("no_clear.py", "uninitialized-read"), ("floor_grid.py", "coverage"),
    ("plain_splitk.py", "write-conflict"), ("causal_bound.py", "spec"), ("swapped_blocks.py", None),
    ("tile_for_size.py", "spec"), ("wrong_scale.py", "spec"), ("dynamic_swapped_guard.py", None),
    ("dynamic_floor_grid.py", "coverage"), ("attention_no_rescale.py", "spec"), ("attention_mask_bound.py", "spec"),
    ("softmax_natural_log.py", "spec"), ("band_or.py", "spec"), ("parity_bit.py", "spec"),
    ("conv_no_pad.py", "spec"), ("conv_filter_tile.py", "spec"), ("conv_dilated.py", "spec"),
    ("inline_min_shift.py", "spec"), ("module_sizes_times.py", "spec"), ("mask_swapped.py", None),
    ("mask_first_k.py", "spec"), ("split_short_combine.py", "spec"), ("split_one_column.py", "uninitialized-read"),
    ("split_mask_inverted.py", "spec"), ("split_both_compared.py", "spec"), ("gcd_tile_offset.py", "spec"),
    ("bias_subtracted.py", "spec"), ("while_stride_skips.py", "coverage"),
    ("k_tiles_short.py", "spec"),
])
def test_kernel_bugs_are_violations_with_a_confirmed_counterexample(reports, name, check):
    report = reports[name]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    errors = [d for d in report.diagnostics if d.severity == "error"]
    if check is not None:
        assert any(d.check == check for d in errors), [d.check for d in errors]
    assert any(d.counterexample is not None and d.counterexample.confirmed for d in errors)


def test_a_mask_the_kernel_branches_on_is_sampled_and_the_report_says_so(reports):
    proven = [p for p in reports["block_sparse_gemm.py"].proven if "kernel computes C = ref_program" in p]
    assert proven and all("Mask (bool) fixed to one sampled value" in p and "other values not proven" in p
                          for p in proven)
    assert all("block_M, block_N, block_K given the reduced value" in p for p in proven)


def test_a_primfunc_launching_twice_runs_the_launches_in_turn_through_its_global_scratch(reports):
    proven = " ".join(reports["split_masked_row_sum.py"].proven)
    assert "kernel computes Out = ref_program(X, Mask)" in proven
    assert "Mask (bool) fixed to one sampled value" in proven  # a uint8 mask only compared with 0
    assert "ref_dense" not in proven  # called with the kernel's inputs, but not compared with its output
    conflicts = [d.message for d in reports["split_one_column.py"].diagnostics if d.check == "write-conflict"]
    assert conflicts and "partial[" in conflicts[0]
    assert _proof_of(reports["split_out_zeroed_first.py"])  # a later launch writing again is no conflict


def test_every_function_the_file_compares_the_kernel_with_is_checked(reports):
    violations = [d.message for d in reports["split_both_compared.py"].diagnostics if d.check == "spec"]
    assert violations and all("ref_dense(X, Mask)" in v for v in violations)
    proven = _proof_of(reports["split_two_right_references.py"])
    assert "Out = ref_program(X, Mask)" in proven and "Out = ref_where(X, Mask)" in proven


def test_an_integer_tensor_the_kernel_computes_with_is_not_sampled_as_a_mask(reports):
    report = reports["split_mask_multiplied.py"]
    assert report.verdict == "unsupported"
    assert any("Mask is a torch.uint8 tensor" in d.message for d in report.diagnostics)


def test_a_size_the_factory_computes_is_not_reduced_to_one_where_the_real_one_is_more(reports):
    proven = _proof_of(reports["gcd_tile_rows.py"])
    assert "N=10 (from 640)" in proven  # N=5 would make gcd(N, blk_n=2) a 1-wide tile: raised


def test_a_reference_taking_what_the_kernel_reads_through_a_view_gets_the_view_undone(reports):
    assert "Y = ref_add_bias(X, b.unsqueeze(0))" in _proof_of(reports["row_bias_view.py"])


def test_a_persistent_while_loop_is_run_and_the_reduced_program_count_is_said(reports):
    assert "num_programs=2 (from 4)" in _proof_of(reports["persistent_while_scale.py"])


def test_a_tile_count_the_caller_computes_follows_the_reduced_size_it_counts(reports):
    assert "k_tiles = ceildiv(K, block_K)" in _proof_of(reports["counted_k_tiles_gemm.py"])


def test_a_const_size_given_by_name_that_is_a_tile_is_reduced_as_a_tile(reports):
    proven = " ".join(reports["chunk_sums.py"].proven)
    assert "chunk_size=2 (from 16)" in proven and "C=3 (from 4)" in proven


def test_module_level_sizes_the_kernel_reads_are_reduced_like_arguments(reports):
    proven = " ".join(reports["module_sizes_rows.py"].proven)
    assert "M=6 (from 96)" in proven and "N=4 (from 40)" in proven


def test_an_inline_expected_value_is_replayed_from_the_kernel_inputs(reports):
    proven = " ".join(reports["inline_checked_row_shift.py"].proven)
    assert "kernel computes Y = the file's own expected value (line 33)" in proven


@pytest.mark.parametrize("name,reason", [("inline_changed_in_place.py", "changed in place"),
                                         ("inline_view_changed.py", "changed in place"),
                                         ("inline_output_changed.py", "changes the kernel's output Y in place"),
                                         ("inline_real_sizes.py", "a real size"),
                                         ("conv_view_dtype.py", "another element type"),
                                         ("reference_of_some_inputs.py", "only some of the kernel's inputs (not B)"),
                                         ("module_computed_grid.py", "ROWS, an integer the file computes at module "
                                                                     "level"),
                                         ("k_tiles_ambiguous.py", "which size it counts the tiles of is not known")])
def test_what_cannot_be_replayed_or_viewed_is_unsupported_with_its_reason(reports, name, reason):
    report = reports[name]
    assert report.verdict == "unsupported", [d.message for d in report.diagnostics]
    assert any(reason in d.message for d in report.diagnostics), [d.message for d in report.diagnostics]


def test_the_reference_the_file_calls_is_re_run_with_its_call_site_arguments(reports):
    proven = " ".join(reports["eager_rms_rows.py"].proven)
    assert "ref_rms_rows(A, n_cols=40, eps=1e-06)" in proven and "re-run by torch" in proven
    assert "n_cols given the reduced value of the size each names or equals" in proven


def test_the_reference_given_to_the_profiler_keeps_its_partial_arguments(reports):
    proven = " ".join(reports["profiler_scaled_gemm.py"].proven)
    assert "alpha=0.5, transpose_b=True" in proven and "via profiler.assert_allclose" in proven


def test_run_time_sizes_are_checked_with_a_partial_last_tile_and_with_exact_multiples(reports):
    proven = reports["dynamic_axpy.py"].proven
    assert any("run-time sizes m, n: a partial last tile" in p and "computes" in p for p in proven)
    assert any("run-time sizes m, n: exact multiples of their tiles" in p and "computes" in p for p in proven)


def test_a_kernel_whose_reference_cannot_be_associated_is_unsupported_not_checked_against_another(reports):
    report = reports["unassociated.py"]
    assert report.verdict == "unsupported"
    reasons = [d.message for d in report.diagnostics if d.check == "unsupported"]
    assert any(r.startswith("copy_transpose: no spec") for r in reasons), reasons
    assert any(p.startswith("add_kernel:") for p in report.proven)


def test_a_jit_kernel_is_recorded_once_not_again_as_a_factory_while_tilelang_elaborates_it():
    pytest.importorskip("tilelang")
    import subprocess
    import sys

    from tir_lifter.elaborate_run import child_env
    code = ("import sys; from tir_lifter.capture import run_file; "
            "print([(i.name, i.factory is None) for i in run_file(sys.argv[1], 20.0).instances])")
    done = subprocess.run([sys.executable, "-c", code, str(EXAMPLES / "flash_attention_causal.py")], env=child_env(),
                          capture_output=True, text=True, timeout=300)  # the run patches torch: in a child
    assert done.stdout.strip().splitlines()[-1] == "[('flash_attention', True)]", done.stderr[-2000:]


def test_no_exec_reads_the_source_without_running_it():
    from tir_lifter import run_lift
    report = run_lift(str(EXAMPLES / "gemm.py"), no_exec=True)
    assert report.extra["frontend"] == "text"
    assert report.verdict == "verified"


def test_the_child_environment_carries_no_credentials(monkeypatch):
    from tir_lifter.elaborate_run import child_env
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    env = child_env()
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "secret" not in " ".join(env.values())


def test_kernel_specs_split_per_kernel_and_file_wide():
    from tir_lifter.lift import kernel_specs
    assert kernel_specs(["matmul=C = A @ B", "D = A + B"]) == {"matmul": "C = A @ B", "": "D = A + B"}
    assert kernel_specs("C = A @ B") == {"": "C = A @ B"}


def test_reduced_tiles_are_distinct_powers_of_two_in_the_order_of_the_real_sizes():
    pytest.importorskip("tilelang")
    from tir_lifter.instantiate import _distinct_powers
    assert _distinct_powers({"block_M": 128, "block_N": 128, "block_K": 32}) == \
        {"block_K": 2, "block_M": 4, "block_N": 8}


def test_a_size_tilelang_needs_as_an_int_keeps_its_divisibility_by_each_tile():
    pytest.importorskip("tilelang")
    from tir_lifter.instantiate import _reduced_problem
    tiles, reduced = {"block_N": 64}, {"block_N": 4}
    assert _reduced_problem(128, tiles, reduced) == 8   # two whole tiles
    assert _reduced_problem(100, tiles, reduced) % 4 != 0  # a partial boundary tile stays partial


def test_module_level_names_assigned_other_than_an_integer_literal_are_computed(tmp_path):
    pytest.importorskip("tilelang")
    from tir_lifter.instantiate import _computed_module_names
    source = tmp_path / "sizes.py"
    source.write_text("M = 96\nN = 40\nROWS = M // 2\nA, B = 8, 16\nC, D = A, 2\nE = F = 4\n\n\ndef run():\n"
                      "    M = 3\n    K = M + 1\n\n\nif N:\n    Q = N * 2\n")
    # a function's own M and K are not the module's
    assert _computed_module_names(str(source)) == {"ROWS", "Q", "C"}


def test_the_checking_budget_ends_a_check_that_swallowed_its_first_stop():
    """Python swallows an exception raised in a destructor (Z3's ``__del__``): the budget's stop
    is raised again until the check ends (a file ran 250 s past a 40 s budget)."""
    pytest.importorskip("tilelang")
    import json
    import subprocess
    import sys

    from tir_lifter.elaborate_run import child_env
    code = ("import json, sys\nfrom tir_lifter import elaborate\n"
            "def stubborn(*args, **kwargs):\n    try:\n        while True:\n            pass\n"
            "    except BaseException:\n        pass\n    while True:\n        pass\n"
            "elaborate._check_kernel = stubborn\n"
            "report = elaborate.run_request({'path': sys.argv[1], 'check_budget': 0.5, 'run_budget': 20})\n"
            "print(json.dumps([d.message for d in report.diagnostics]))\n")
    done = subprocess.run([sys.executable, "-c", code, str(EXAMPLES / "eager_elementwise.py")], env=child_env(),
                          capture_output=True, text=True, timeout=300)
    messages = json.loads(done.stdout.strip().splitlines()[-1])
    assert any("checking budget of" in m and "CPU s is spent" in m for m in messages), messages
