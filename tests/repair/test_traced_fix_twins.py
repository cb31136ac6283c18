"""Twin tests of repair on what a traced run shows: per bug class a buggy file and its fixed twin.

For each class the buggy file gets a fix whose patched file the traced check verifies and real
gloo ranks confirm, the fix is the twin's change, the fixed twin verifies as it is, and the
patched file matches one device on real gloo ranks (the test-only ground-truth runner, outputs
and gradients).  The classes: a custom backward that forgets its all-reduce, a forward that
forgets it, a loss averaged twice (scaling), a gather concatenated on the wrong dim, a plain
torch.distributed MLP without its reduction (forward and input gradient), a vocabulary-parallel
lookup whose foreign ids are not masked, a DTensor plan whose row-parallel output stays sharded.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from verify_agent.repair.commands import check_file, find_fixes

pytest.importorskip("torch")

try:
    from groundtruth import realworld_runner as rw
    from groundtruth import runner as gt
except ImportError:  # imported under another rootdir/import mode
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundtruth import realworld_runner as rw
    from groundtruth import runner as gt

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CASES = Path(__file__).parent / "cases"

TWINS = {
    # bug class: (buggy file, fixed twin, a line the fix must add)
    "custom backward missing all-reduce": ("tp_mlp_backward_missing_allreduce.py", "tp_mlp_fixed.py",
                                           "dist.all_reduce(grad_output)"),
    # either the Function's forward gets its all-reduce back, or its input is all-reduced before it
    "forward missing all-reduce": ("tp_mlp_forward_missing_allreduce.py", "tp_mlp_fixed.py",
                                   ("dist.all_reduce(x)", "dist.all_reduce(y)")),
    "loss averaged twice": ("dp_loss_averaged_twice.py", "dp_loss_fixed.py", "total = ReduceFromRegion.apply(partial)\n"),
    "gather on the wrong dim": ("tp_gather_wrong_dim.py", "tp_gather_fixed.py", "torch.cat(pieces, dim=-1)"),
    # dist.all_reduce(y) alone leaves the input gradient a partial sum: the region pair is written in
    "plain reduction missing (forward and input gradient)": (
        "tp_mlp_plain_missing_allreduce.py", "tp_mlp_plain_fixed.py", "_CopyToRanks.apply(x) @"),
    "foreign ids not masked": ("vocab_embedding_unmasked.py", "vocab_embedding_masked.py",
                               "out = out.masked_fill(foreign.unsqueeze(-1), 0.0)"),
    "DTensor plan output left sharded": ("dtensor_mlp_output_sharded.py", "dtensor_mlp_plan_fixed.py",
                                         "RowwiseParallel(output_layouts=Replicate())"),
}


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copyfile(CASES / name, target)
    return target


@pytest.fixture(scope="module")
def twin_report(tmp_path_factory):
    """``check_file``'s report on a verified twin (a copy in a folder of its own), checked once per
    file for the module: two bug classes share tp_mlp_fixed.py, and context_parallel_causal_mask.py
    is the twin of the dropped all-gather and of the local positions."""
    reports = {}

    def report_of(folder: Path, name: str):
        if (folder, name) not in reports:
            path = tmp_path_factory.mktemp("twin") / name
            shutil.copyfile(folder / name, path)
            reports[(folder, name)] = check_file(path)[1].report
        return reports[(folder, name)]
    return report_of


def _assert_verified(report) -> None:
    assert report.verdict == "verified", [d.message for d in report.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("bug", sorted(TWINS))
def test_fixed_twin_verifies(twin_report, bug):
    _, fixed, _ = TWINS[bug]
    _assert_verified(twin_report(CASES, fixed))


def _confirmed_fix(path: Path):
    """The first fix ``find_fixes`` shows for the buggy file at ``path``: verified and confirmed."""
    report, fixes = find_fixes(path, top_k=1)
    assert report.verdict == "violations"
    assert fixes, "no verified fix"
    fix = fixes[0]
    assert fix.report.verdict == "verified"
    assert "confirmed on 2 and 4 gloo ranks" in fix.description
    return fix


def _matches_one_device(patched: Path, realworld: bool, modes=("forward", "grad")) -> None:
    """Ground truth: the patched file on 2 and 4 gloo ranks against one, through the real-world
    runner (plans, launch scripts) or as an entry (outputs, and gradients in grad mode, in float64).
    One batch: the 1-rank references and each world size share their worker processes (a run per
    world and mode started 16 processes for an entry, the batch starts 7)."""
    path = str(patched.resolve())
    if realworld:
        truths = rw.run_jobs([rw.Job(rw.Spec(path), world) for world in (2, 4)])
    else:
        truths = gt.run_jobs([gt.Job(gt.JobSpec(path, mode, dtype="float64"), world)
                              for world in (2, 4) for mode in modes])
    assert len(truths) == (2 if realworld else 2 * len(modes))
    assert [truth.summary() for truth in truths if not truth.matches] == []


@pytest.mark.parametrize("bug", sorted(TWINS))
def test_buggy_file_gets_a_confirmed_fix_that_matches_one_device(tmp_path, bug):
    buggy, _, added = TWINS[bug]
    path = _copy(tmp_path, buggy)
    before = path.read_text()
    fix = _confirmed_fix(path)
    assert any(text in fix.patched for text in ((added,) if isinstance(added, str) else added))
    assert path.read_text() == before          # fix without --write leaves the file alone
    patched = tmp_path / f"patched_{buggy}"
    patched.write_text(fix.patched)
    # a DTensor plan: the real-world runner builds it on a gloo mesh
    _matches_one_device(patched, realworld="def build(" in fix.patched)


REALWORLD = Path(__file__).resolve().parents[2] / "examples" / "realworld"


def test_input_seeded_by_rank_gets_the_same_seed_on_every_rank(tmp_path):
    """``torch.manual_seed(i + RANK)`` before the batch is drawn (a launch script around DTensor's
    plans): the fix drops the rank from the seed, as its twin ``tp_example_launch.py`` seeds."""
    path = tmp_path / "tp_example_launch_input_seeded_by_rank.py"
    shutil.copyfile(REALWORLD / path.name, path)
    fix = _confirmed_fix(path)
    assert "    torch.manual_seed(i)\n" in fix.patched
    patched = tmp_path / "patched.py"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=True)


def test_input_seeded_by_rank_twin_verifies(twin_report):
    _assert_verified(twin_report(REALWORLD, "tp_example_launch.py"))


GATHER_CALL = "    dist.all_gather(pieces, t.contiguous())\n"


def test_gather_buffer_no_collective_fills_gets_its_all_gather_back(tmp_path):
    """A context-parallel attention whose all-gather of the keys was dropped (its buffer is still
    allocated and concatenated): the all-gather is written back after the allocation."""
    text = (REALWORLD / "context_parallel_causal_mask.py").read_text()
    assert GATHER_CALL in text
    path = tmp_path / "context_parallel_causal_mask_no_gather.py"
    path.write_text(text.replace(GATHER_CALL, ""))
    fix = _confirmed_fix(path)
    assert "    dist.all_gather(pieces, t)\n" in fix.patched
    patched = tmp_path / "patched.py"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=True)


def test_gather_buffer_twin_verifies(twin_report):
    _assert_verified(twin_report(REALWORLD, "context_parallel_causal_mask.py"))


def test_norm_on_sequence_shards_gets_its_parameters_marked_sequence_parallel(tmp_path):
    """A Megatron-core sequence-parallel block whose LayerNorm parameters are not marked: their
    gradients stay each rank's own tokens'; the fix marks them as Megatron's norms do, and
    Megatron's gradient finalisation all-reduces them (the twin: megatron_sequence_parallel_block.py)."""
    pytest.importorskip("megatron.core")
    path = tmp_path / "megatron_sp_layernorm_grad_not_reduced.py"
    shutil.copyfile(REALWORLD / path.name, path)
    fix = _confirmed_fix(path)
    assert 'setattr(param, "sequence_parallel", config.sequence_parallel)' in fix.patched
    patched = tmp_path / "patched.py"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=True)


def test_norm_on_sequence_shards_twin_verifies(twin_report):
    pytest.importorskip("megatron.core")
    _assert_verified(twin_report(REALWORLD, "megatron_sequence_parallel_block.py"))


MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"

# bug class: (folder, buggy file, verified twin, a text the fix must write)
WAIT_AND_POSITION_TWINS = {
    # isend/irecv whose works are dropped: named, then both waited on after both are posted
    "async p2p never waited on": (REALWORLD, "ring_attention_missing_wait.py", "ring_attention_online_softmax.py",
                                  "    request = dist.isend(kv, dst=send_to)\n"
                                  "    request2 = dist.irecv(kv_next, src=recv_from)\n"
                                  "    request.wait()\n    request2.wait()\n"),
    # an async all-reduce waited on after its buffer is read: the wait moves before the read
    "wait after the read": (MODELS, "dist_async_read_before_wait.py", "dist_async_overlap_ok.py",
                            "    work.wait()\n    out = y + side\n    return out\n"),
    # a causal mask built from positions inside the shard: the shard's offset is added
    "causal mask from local positions": (REALWORLD, "context_parallel_causal_mask_local_positions.py",
                                         "context_parallel_causal_mask.py",
                                         "    q_pos = rank * chunk + torch.arange(chunk)\n"),
}


@pytest.mark.parametrize("bug", sorted(WAIT_AND_POSITION_TWINS))
def test_wait_and_position_bugs_get_a_confirmed_fix_that_matches_one_device(tmp_path, bug):
    folder, buggy, _, written = WAIT_AND_POSITION_TWINS[bug]
    path = tmp_path / buggy
    shutil.copyfile(folder / buggy, path)
    fix = _confirmed_fix(path)
    assert written in fix.patched
    patched = tmp_path / f"patched_{buggy}"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=folder is REALWORLD)


@pytest.mark.parametrize("bug", sorted(WAIT_AND_POSITION_TWINS))
def test_wait_and_position_twins_verify(twin_report, bug):
    folder, _, twin, _ = WAIT_AND_POSITION_TWINS[bug]
    _assert_verified(twin_report(folder, twin))


def _wait_and_position_edits(folder: Path, name: str) -> list[str]:
    """Every patched text the wait and position recipes offer at any line of the file."""
    from frontends.patches.at_line import Site
    from frontends.patches.positions import global_positions
    from frontends.patches.waits import wait_before_read, wait_handles

    text = (folder / name).read_text()
    return [patched for recipe in (wait_handles, wait_before_read, global_positions)
            for line in range(1, len(text.splitlines()) + 1)
            for _, patched, _ in recipe(text, name, Site(line))]


@pytest.mark.parametrize("bug", sorted(WAIT_AND_POSITION_TWINS))
def test_wait_and_position_recipes_write_the_twin_edit_and_leave_the_twin_alone(bug):
    folder, buggy, twin, written = WAIT_AND_POSITION_TWINS[bug]
    assert any(written in patched for patched in _wait_and_position_edits(folder, buggy))
    # the correct twin is already waited on and offset: nothing is proposed at any of its lines
    assert _wait_and_position_edits(folder, twin) == []


# bug class: (buggy file in cases/, a text the fix must write); the verified twin of both is
# examples/models/dist_ring_allgather_ok.py
PARTNER_TWINS = {
    # the ring's recv lost: every isend goes unreceived; the recv comes back beside it, from the
    # previous rank, into the block that rank sent
    "recv partner removed": ("ring_allgather_recv_dropped.py",
                             "        send_req = dist.isend(blocks[(rank - step) % world], dst=nxt)\n"
                             "        dist.recv(blocks[(prev - step) % world], src=prev)\n"),
    # the ring's isend lost: every recv waits; the block the next rank expects is sent to it
    "send partner removed": ("ring_allgather_send_dropped.py",
                             "        send_request = dist.isend(blocks[(nxt - step - 1) % world], dst=nxt)\n"
                             "        dist.recv(blocks[(rank - step - 1) % world], src=prev)\n"
                             "        send_request.wait()\n"),
}


@pytest.mark.parametrize("bug", sorted(PARTNER_TWINS))
def test_removed_partner_gets_a_confirmed_fix_that_matches_one_device(tmp_path, bug):
    buggy, written = PARTNER_TWINS[bug]
    fix = _confirmed_fix(_copy(tmp_path, buggy))
    assert written in fix.patched
    patched = tmp_path / f"patched_{buggy}"
    patched.write_text(fix.patched)
    # forward only: the ring states its inputs not trainable (point-to-point ops carry no gradient),
    # so gradient mode has nothing to differentiate
    _matches_one_device(patched, realworld=False, modes=("forward",))


def _partner_edits(path: Path) -> list[str]:
    from frontends.patches.at_line import Site
    from frontends.patches.partners import add_partner

    text = path.read_text()
    return [patched for line in range(1, len(text.splitlines()) + 1)
            for _, patched, _ in add_partner(text, path.name, Site(line, "p2p"))]


@pytest.mark.parametrize("bug", sorted(PARTNER_TWINS))
def test_partner_recipe_writes_the_partner_and_leaves_the_paired_twin_alone(bug):
    buggy, written = PARTNER_TWINS[bug]
    assert any(written in patched for patched in _partner_edits(CASES / buggy))
    # the verified ring pairs each isend with a recv: nothing is proposed at any of its lines
    assert _partner_edits(MODELS / "dist_ring_allgather_ok.py") == []


# a pipeline stage posting its receives in the other order than the previous stage sends (blocking
# send/recv under gloo: a deadlock); the verified twin receives in send order
ORDER_BUGGY, ORDER_TWIN = "pipeline_p2p_tag_order_deadlock.py", "pipeline_p2p_microbatches.py"


def test_receives_in_the_other_order_get_a_confirmed_fix_that_matches_one_device(tmp_path):
    path = tmp_path / ORDER_BUGGY
    shutil.copyfile(REALWORLD / ORDER_BUGGY, path)
    fix = _confirmed_fix(path)
    # either side takes the other's order: the receives go 0, 1 or the sends go 1, 0
    assert ("        for mb in (0, 1):\n            dist.recv(" in fix.patched
            or "        for mb in (1, 0):\n            dist.send(" in fix.patched)
    patched = tmp_path / f"patched_{ORDER_BUGGY}"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=True)


def test_receives_in_send_order_twin_verifies(twin_report):
    _assert_verified(twin_report(REALWORLD, ORDER_TWIN))


def _order_edits(path: Path) -> list[str]:
    from frontends.patches.at_line import Site
    from frontends.patches.p2p_order import match_order

    text = path.read_text()
    return [patched for line in range(1, len(text.splitlines()) + 1)
            for _, patched, _ in match_order(text, path.name, Site(line, "deadlock"))]


def test_order_recipe_writes_the_twin_order_and_leaves_the_twin_alone():
    edits = _order_edits(REALWORLD / ORDER_BUGGY)
    assert (REALWORLD / ORDER_TWIN).read_text().split('"""', 2)[2] in [e.split('"""', 2)[2] for e in edits]
    # sends and receives already in the same order: nothing is proposed at any line
    assert _order_edits(REALWORLD / ORDER_TWIN) == []


def test_two_bugs_get_both_edits_confirmed_and_match_one_device(tmp_path):
    """The reduce-from-region forward and the copy-to-region backward both lost their all-reduce: the
    forward's fix shows the backward's finding (it hid it), and is the base of the second edit.  The
    verified twin is tp_mlp_fixed.py (``test_fixed_twin_verifies``)."""
    fix = _confirmed_fix(_copy(tmp_path, "tp_mlp_two_bugs.py"))
    assert "    def backward(ctx, grad_output):\n        dist.all_reduce(grad_output)\n" in fix.patched
    assert "    def forward(ctx, x):\n        dist.all_reduce(x)\n        return x\n" in fix.patched
    patched = tmp_path / "patched_tp_mlp_two_bugs.py"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=False)


def test_two_bugs_in_one_pass_get_one_patch_fixing_both(tmp_path):
    """A reduction missing and a ``/ world`` wrongly added, both in the forward: neither single edit makes
    headway by the pass (the forward stays violated), but with ``/ world`` removed the run goes wrong at
    the partial sum instead, and the second edit reduces it.  One patch fixes both, verified, confirmed on
    2 and 4 gloo ranks, and the patched file matches one device (outputs and gradients).  The verified
    twin is tp_mlp_plain_fixed.py (``test_fixed_twin_verifies``)."""
    fix = _confirmed_fix(_copy(tmp_path, "tp_mlp_reduce_missing_and_divided.py"))
    assert "/ world" not in fix.patched
    assert "_ReduceFromRanks.apply(" in fix.patched or "dist.all_reduce(" in fix.patched
    patched = tmp_path / "patched_tp_mlp_reduce_missing_and_divided.py"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=False)


def test_three_edits_are_chained_when_each_uncovers_the_next(tmp_path):
    """Two surplus all-reduces and an input gradient never all-reduced: removing the duplicate makes the run
    go wrong at the output's all-reduce, removing that one proves the forward and shows the input gradient's
    finding, and guarding ``x`` fixes it; the three edits are one patch, confirmed on 2 and 4 gloo ranks,
    and the patched file matches one device (outputs and gradients)."""
    fix = _confirmed_fix(_copy(tmp_path, "tp_mlp_residual_reduced_three_times.py"))
    assert fix.patched.count("dist.all_reduce(y)") == 1 and "dist.all_reduce(out)" not in fix.patched
    patched = tmp_path / "patched_tp_mlp_residual_reduced_three_times.py"
    patched.write_text(fix.patched)
    _matches_one_device(patched, realworld=False)
