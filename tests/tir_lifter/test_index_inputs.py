"""Integer index tensors as inputs drawn the way the file draws them (``tir_lifter/index_inputs.py``).

A kernel that gathers rows through ``Idx`` (``torch.randint(0, M, (N,))`` in the file) is checked
with one sample of ``Idx`` drawn by ``randint(0, <X's reduced rows>)``, the same for its reference;
the verdict says it holds for that sample.  A mutant reading the index tensor at the wrong element
is a confirmed violation at its line; an index tensor drawn below a bound that is no size, or made
by anything else than ``torch.randint``, is unsupported with that reason (its domain is never
guessed); a reference given a scale the file computes from a real size gets it from the reduced one.
A paged gather's block table (``torch.randperm(num_pages)`` viewed as the table) is redrawn by the
same call at the pool's reduced rows, one entry per row as in the file; reading the wrong page is a
confirmed violation at its line.
"""
from __future__ import annotations

import pytest
from lifter_helpers import EXAMPLES, lift_files, line_of

GATHER = (EXAMPLES / "gather_rows.py").read_text()
PAGED = (EXAMPLES / "paged_gather.py").read_text()
PAGE_READ = "KV[BlockTable[b, p], s, d]"

READ = "X[Idx[bx * block_N + i], d]"
FILES = {
    "gather_rows.py": GATHER,
    "gather_rows_wrong_element.py": GATHER.replace(READ, "X[Idx[i], d]"),
    "gather_rows_no_size_bound.py": GATHER.replace("torch.randint(0, M,", "torch.randint(0, 100,"),
    "gather_rows_sorted.py": GATHER.replace("torch.randint(0, M, (N,), dtype=torch.int32, device=\"cuda\")",
                                            "torch.randint(0, M, (N,), dtype=torch.int32, device=\"cuda\").sort()[0]"),
    "gather_rows_scale_of_no_size.py": GATHER.replace("1.0 / math.sqrt(D)", "1.0 / math.sqrt(100)"),
    # a scalar parameter among the tensors (``rows: T.int32``): the launch's arguments are matched by
    # the PrimFunc's positions, scalars included, so the index tensor is traced to what made it
    "gather_rows_scalar_parameter_sorted.py": GATHER.replace("@tilelang.jit(out_idx=[2])", "@tilelang.jit(out_idx=[3])")
    .replace("Idx: T.Tensor((N,), T.int32), Y:", "Idx: T.Tensor((N,), T.int32), rows: T.int32, Y:")
    .replace("kernel(x, idx)", "kernel(x, idx, N)")
    .replace("torch.randint(0, M, (N,), dtype=torch.int32, device=\"cuda\")",
             "torch.randint(0, M, (N,), dtype=torch.int32, device=\"cuda\").sort()[0]"),
    "paged_gather.py": PAGED,
    "paged_gather_first_page.py": PAGED.replace(PAGE_READ, "KV[BlockTable[b, 0], s, d]"),
    "paged_gather_profiler_func.py": PAGED.replace("assert_close(kernel(kv, block_table)",
                                                   "assert_close(kernel.get_profiler().func(kv, block_table)"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("index_inputs")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_gather_through_a_randint_index_tensor_verifies_for_one_sample_said_so(reports):
    report = reports[1]["gather_rows.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "Idx (int32) fixed to one sample of the file's torch.randint(0, X axis 0)" in proven
    assert "other values not proven" in proven


@pytest.mark.tilelang
def test_reading_the_index_tensor_at_the_wrong_element_is_a_confirmed_violation_at_that_line(reports):
    folder, found = reports
    report = found["gather_rows_wrong_element.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "gather_rows_wrong_element.py"), "X[Idx[i], d]")


@pytest.mark.tilelang
def test_an_index_tensor_whose_range_is_no_size_or_not_drawn_by_randint_is_unsupported(reports):
    bound = reports[1]["gather_rows_no_size_bound.py"]
    assert bound.verdict == "unsupported", _messages(bound)
    assert any("torch.randint(0, 100)" in m and "reduced range is unknown" in m for m in _messages(bound))
    made = reports[1]["gather_rows_sorted.py"]
    assert made.verdict == "unsupported", _messages(made)
    assert any("the file makes it with sort" in m and "not guessed" in m for m in _messages(made))


@pytest.mark.tilelang
def test_the_launch_of_a_kernel_with_a_scalar_parameter_traces_its_index_tensor(reports):
    report = reports[1]["gather_rows_scalar_parameter_sorted.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("the kernel reads Idx as an index; the file makes it with sort" in m for m in _messages(report))
    assert not any("not recorded" in m for m in _messages(report))


def test_a_launch_passes_its_arguments_by_the_positions_of_every_parameter_scalars_included():
    torch = pytest.importorskip("torch")
    from tir_lifter.capture import Instance, Launch
    from tir_lifter.reference import launch_tensors
    x, idx = torch.empty(4, device="meta"), torch.zeros(2, dtype=torch.int32)
    launch = Launch(Instance("k", None), (x, idx, 7), (3,))  # ``kernel(x, idx, rows)``, ``out_idx=[3]``
    assert launch_tensors(launch, ["X", "Idx", "Y"], ("X", "Idx", "rows", "Y")) == {"X": x, "Idx": idx}
    # without the scalar's position the arguments do not line up: nothing is paired
    assert launch_tensors(launch, ["X", "Idx", "Y"]) == {}


@pytest.mark.tilelang
def test_a_reference_scale_of_no_size_makes_a_difference_unattributable(reports):
    report = reports[1]["gather_rows_scale_of_no_size.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("scale=0.1 of no size it reduces" in m for m in _messages(report))


def test_only_integer_inputs_read_as_indices_are_sampled_never_an_output_or_a_value():
    from tir_lifter.index_inputs import index_reads
    from tir_lifter.program import Buffer, Const, Kernel, Load, Loop, Store, Var
    i = Var("i")
    params = (Buffer("X", (Const(4),), "float32", "global"), Buffer("Idx", (Const(4),), "int32", "global"),
              Buffer("Data", (Const(4),), "int32", "global"), Buffer("Out", (Const(4),), "int32", "global"))
    body = (Loop("i", Const(4), "serial", (
        Store("Out", (Load("Idx", (i,)),), Load("X", (Load("Out", (i,)),))),  # Out read as an index: written
        Store("Out", (i,), Load("Data", (i,))),  # Data read as a value only
    )),)
    assert index_reads(Kernel("k", params, (), (), body)) == {"Idx"}


@pytest.mark.tilelang
def test_a_paged_gather_through_a_randperm_block_table_verifies_for_one_redrawn_table_said_so(reports):
    report = reports[1]["paged_gather.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "BlockTable (int32) fixed to one sample of the file's torch.randperm(KV axis 0)" in proven
    assert "other values not proven" in proven
    # launched through TileLang's profiler.func (the kernel's adapter): the same launch, the same table
    through_profiler = reports[1]["paged_gather_profiler_func.py"]
    assert through_profiler.verdict == "verified", _messages(through_profiler)
    assert proven.count("torch.randperm") == " ".join(through_profiler.proven).count("torch.randperm") > 0


@pytest.mark.tilelang
def test_reading_the_wrong_page_of_the_table_is_a_confirmed_violation_at_that_line(reports):
    folder, found = reports
    report = found["paged_gather_first_page.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "paged_gather_first_page.py"), "KV[BlockTable[b, 0], s, d]")


def test_a_table_numbering_every_row_once_is_redrawn_at_the_reduced_rows_or_refused():
    import numpy as np
    import torch
    from tir_lifter.capture import Derivation
    from tir_lifter.errors import Unsupported
    from tir_lifter.index_inputs import sample_plan
    from tir_lifter.program import Buffer, Const, Kernel, Load, Loop, Store, Var
    i = Var("i")
    params = (Buffer("KV", (Const(6),), "float32", "global"), Buffer("Table", (Const(2), Const(3)), "int32", "global"),
              Buffer("Out", (Const(6),), "float32", "global"))
    body = (Loop("i", Const(6), "serial", (
        Store("Out", (i,), Load("KV", (Load("Table", (Const(0), i)),))),)),)
    kernel = Kernel("k", params, (), (), body)
    kv, flat, table = torch.empty(6, device="meta"), torch.empty(6, device="meta"), torch.empty(2, 3, device="meta")

    def plan(func, *args):
        derivations = {id(flat): Derivation(func, args, {}), id(table): Derivation(torch.Tensor.view, (flat, 2, 3), {})}
        return sample_plan(kernel, {"KV": kv, "Table": table, "Out": kv}, derivations)
    (perm,) = plan(torch.randperm, 6)
    assert perm.axes == (("KV", 0), ("Out", 0)) and "torch.randperm(KV axis 0 = Out axis 0)" in perm.describe()
    drawn = perm.values((2, 2), {"KV": (4,), "Out": (4,), "Table": (2, 2)}, 0)
    assert sorted(drawn.ravel().tolist()) == [0, 1, 2, 3]  # every reduced row once
    (ordered,) = plan(torch.arange, 0, 6)
    assert np.array_equal(ordered.values((2, 2), {"KV": (4,), "Out": (4,)}, 0), [[0, 1], [2, 3]])
    with pytest.raises(Unsupported, match="4 entries for 6 rows"):  # the reduction lost one entry per row
        ordered.values((2, 2), {"KV": (6,), "Out": (6,)}, 0)
    with pytest.raises(Unsupported, match="arguments other than one count of rows"):
        plan(torch.arange, 0, 12, 2)
    with pytest.raises(Unsupported, match="not the 8 rows"):  # a part of a larger table
        plan(torch.randperm, 8)


def test_sequence_offsets_from_a_cumsum_are_refused_naming_the_size_their_total_is():
    # ``cu_seqlens = pad(cumsum(lengths), (1, 0))``: its last entry is the number of packed rows, a
    # size of the kernel's tensors, so a sample at the reduced sizes would have to change that size too
    import torch
    from tir_lifter.capture import Derivation
    from tir_lifter.errors import Unsupported
    from tir_lifter.index_inputs import sample_plan
    from tir_lifter.program import Buffer, Const, Kernel, Load, Loop, Store, Var
    i = Var("i")
    params = (Buffer("X", (Const(7),), "float32", "global"), Buffer("Offsets", (Const(3),), "int32", "global"),
              Buffer("Out", (Const(2),), "float32", "global"))
    body = (Loop("i", Const(2), "serial", (Store("Out", (i,), Load("X", (Load("Offsets", (i,)),))),)),)
    kernel = Kernel("k", params, (), (), body)
    lengths = torch.tensor([3, 4])
    summed = torch.cumsum(lengths, 0)
    padded = torch.nn.functional.pad(summed, (1, 0))
    offsets = padded.int()
    x, out = torch.empty(7, device="meta"), torch.empty(2, device="meta")
    derivations = {id(lengths): Derivation(torch.randint, (1, 5, (2,)), {}),
                   id(summed): Derivation(torch.cumsum, (lengths, 0), {}),
                   id(padded): Derivation(torch.nn.functional.pad, (summed, (1, 0)), {}),
                   id(offsets): Derivation(torch.Tensor.int, (padded,), {})}
    with pytest.raises(Unsupported) as refused:
        sample_plan(kernel, {"X": x, "Offsets": offsets, "Out": out}, derivations)
    assert "sequence offsets (torch.nn.functional.pad of a torch.cumsum of lengths)" in refused.value.reason
    assert "whose total 7 is the size of X axis 0" in refused.value.reason


def test_an_index_tensor_the_file_changes_in_place_is_refused_saying_so():
    # ``indices = torch.full(...)`` then ``indices[b, t, :n] = torch.randperm(t)[:n]`` in a loop:
    # no recorded call made its values
    import torch
    from tir_lifter.capture import Derivation
    from tir_lifter.errors import Unsupported
    from tir_lifter.index_inputs import sample_plan
    from tir_lifter.program import Buffer, Const, Kernel, Load, Loop, Store, Var
    i = Var("i")
    params = (Buffer("X", (Const(4),), "float32", "global"), Buffer("Idx", (Const(2),), "int32", "global"),
              Buffer("Out", (Const(2),), "float32", "global"))
    body = (Loop("i", Const(2), "serial", (Store("Out", (i,), Load("X", (Load("Idx", (i,)),))),)),)
    filled = torch.tensor([3, 0], dtype=torch.int32)
    x, out = torch.empty(4, device="meta"), torch.empty(2, device="meta")
    with pytest.raises(Unsupported) as refused:
        sample_plan(Kernel("k", params, (), (), body), {"X": x, "Idx": filled, "Out": out},
                    {id(filled): Derivation(None, (), {})})
    assert "the file makes it with a tensor it then changes in place" in refused.value.reason


def test_an_index_tensor_of_a_kernel_the_run_never_launches_says_so():
    # the file launches the kernel only inside a function it hands to a benchmark, which the run does
    # not call: the index tensor's maker is unknown, and the reason is the missing launch
    from tir_lifter.capture import Capture, Instance
    from tir_lifter.elaborate import _with_index_samples
    from tir_lifter.errors import Unsupported
    from tir_lifter.program import Buffer, Const, Kernel, Load, Loop, Store, Var
    i = Var("i")
    params = (Buffer("X", (Const(4),), "float32", "global"), Buffer("Idx", (Const(2),), "int32", "global"),
              Buffer("Out", (Const(2),), "float32", "global"))
    body = (Loop("i", Const(2), "serial", (Store("Out", (i,), Load("X", (Load("Idx", (i,)),))),)),)
    with pytest.raises(Unsupported) as refused:
        _with_index_samples(Kernel("k", params, (), (), body), Instance("k", None), Capture())
    assert "reads Idx as an index, and the file's run launches it nowhere" in refused.value.reason


def test_an_index_tensor_given_another_shape_by_unsqueeze_keeps_its_randint_sample():
    # ``torch.randint(0, M, (N,)).unsqueeze(-1)``: the same values in the same order, one more axis;
    # ``expand`` repeats them and is refused
    import torch
    from tir_lifter.capture import Derivation
    from tir_lifter.errors import Unsupported
    from tir_lifter.index_inputs import sample_plan
    from tir_lifter.program import Buffer, Const, Kernel, Load, Loop, Store, Var
    i = Var("i")
    params = (Buffer("X", (Const(6),), "float32", "global"), Buffer("Idx", (Const(4), Const(1)), "int32", "global"),
              Buffer("Out", (Const(4),), "float32", "global"))
    body = (Loop("i", Const(4), "serial", (Store("Out", (i,), Load("X", (Load("Idx", (i, Const(0))),))),)),)
    kernel = Kernel("k", params, (), (), body)
    drawn = torch.randint(0, 6, (4,))
    shaped = drawn.unsqueeze(-1)
    x, out = torch.empty(6, device="meta"), torch.empty(4, device="meta")
    derivations = {id(drawn): Derivation(torch.randint, (0, 6, (4,)), {}),
                   id(shaped): Derivation(torch.Tensor.unsqueeze, (drawn, -1), {})}
    (sample,) = sample_plan(kernel, {"X": x, "Idx": shaped, "Out": out}, derivations)
    assert sample.axes == (("X", 0),) and "torch.randint(0, X axis 0)" in sample.describe()
    repeated = torch.randint(0, 6, (1, 1)).expand(4, 1)
    derivations[id(repeated)] = Derivation(torch.Tensor.expand, (drawn, 4, 1), {})
    with pytest.raises(Unsupported) as refused:
        sample_plan(kernel, {"X": x, "Idx": repeated, "Out": out}, derivations)
    assert "the file makes it with expand" in refused.value.reason
