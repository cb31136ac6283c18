"""A rank that raises where the single-device run does not.

Evidence, a violation at its line: the exception does not depend on values a simulated
collective computed (those are not real) and was not raised inside torch.distributed's
process-group layer (which the fake group stands in for); an error about shapes is evidence
either way (simulated ranks compute shapes exactly).  Otherwise: unsupported, saying why.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
HEADER = """
    import torch
    import torch.distributed as dist


    def example_inputs():
        return torch.randn(4, 8), torch.randn(8, 8)

"""


def translate(tmp_path: Path, body: str) -> tuple[int, dict]:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(HEADER) + textwrap.dedent(body))
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=240)
    return run.returncode, json.loads(run.stdout)


def test_a_shape_error_only_on_the_ranks_is_a_violation_at_its_line(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x, w):
            shard = w.chunk(dist.get_world_size(), dim=1)[dist.get_rank()]
            return x @ shard @ shard  # fits only while the shard is square: on one device
    """)
    assert code == 1, body
    (error,) = [d for d in body["diagnostics"] if d["severity"] == "error"]
    # named where the shape the second matmul cannot take was made: the cut (the raise's line is said)
    assert error["line"] == 11 and "raises where the single-device run does not" in error["message"]
    assert "(raised at line 12)" in error["message"], error["message"]


def test_another_exception_of_a_rank_is_a_violation_naming_its_line(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x, w):
            if dist.get_rank() == 1:
                raise ValueError("rank 1 refuses")
            return x @ w
    """)
    assert code == 1, body
    (error,) = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert error["line"] == 12 and "rank 1 of 2 raises where the single-device run does not" in error["message"]
    assert "ValueError: rank 1 refuses" in error["message"]


def test_an_exception_after_reading_a_simulated_collectives_values_is_not_evidence(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x, w):
            y = x @ w
            dist.all_reduce(y)
            if dist.get_world_size() > 1 and bool(y.abs().sum() > -1.0):
                raise ValueError("a check on the reduced values")
            return y
    """)
    assert code == 3 and body["verdict"] == "unsupported", body
    assert "simulated collective" in json.dumps(body)


def test_a_blocking_send_to_the_rank_itself_is_a_violation_at_its_line(tmp_path):
    # torch.distributed refuses it with a ValueError (gloo: the same on 2 and 4 real ranks)
    code, body = translate(tmp_path, """
        def forward(x, w):
            y = x @ w
            if dist.get_world_size() > 1 and dist.get_rank() == 0:
                dist.send(y, dst=0)
            return y
    """)
    assert code == 1, body
    (error,) = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert error["line"] == 13 and "should not be the same as the rank" in error["message"]


def test_a_batched_message_to_the_rank_itself_is_a_p2p_violation(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x, w):
            y = (x @ w).contiguous()
            rank, world = dist.get_rank(), dist.get_world_size()
            if world > 1:
                buffer = torch.empty_like(y)
                ops = [dist.P2POp(dist.isend, y, rank), dist.P2POp(dist.irecv, buffer, rank)]  # peer: itself
                for request in dist.batch_isend_irecv(ops):
                    request.wait()
            return y
    """)
    assert code == 1, body
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert errors and errors[0]["check"] == "p2p" and errors[0]["line"] == 16, errors  # where the batch is issued
    assert "itself as its peer" in errors[0]["message"]


VOCAB_SHARDED_LOSS = """
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    VOCAB = 16


    def forward(logits, labels):
        world, rank = dist.get_world_size(), dist.get_rank()
        local = logits.chunk(world, dim=-1)[rank]
        {body}


    def example_inputs():
        return torch.randn(6, VOCAB), torch.randint(0, VOCAB, (6,))
"""
LOCAL_LOSS = "return F.cross_entropy(local, labels)  # labels of other shards index past the local block"
GATHERED_LOSS = """pieces = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(pieces, local)
        return F.cross_entropy(torch.cat(pieces, dim=-1), labels)"""


def _vocab_program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / f"loss_{abs(hash(body))}.py"
    path.write_text(textwrap.dedent(VOCAB_SHARDED_LOSS.replace("{body}", body)))
    return path


def test_a_rank_indexing_past_its_vocabulary_shard_is_named_and_fails_for_real(tmp_path):
    """torch raises on the rank already while the file runs (an input error naming the line, exit
    2) or the checker's evaluation finds it (a violation, exit 1); never verified."""
    path = _vocab_program(tmp_path, LOCAL_LOSS)
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=240)
    report = json.loads(run.stdout)
    assert run.returncode in (1, 2) and report["verdict"] in ("violations", "input-error"), report
    assert any(d.get("line") == 12 for d in report["diagnostics"]), report["diagnostics"]
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth.realworld_runner import STATUS_MATCH, run_file
    truth = run_file(path, 2)
    assert truth.status != STATUS_MATCH and "out of bounds" in str(truth), truth


def test_gathering_the_vocabulary_first_verifies(tmp_path):
    path = _vocab_program(tmp_path, GATHERED_LOSS)
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=240)
    assert (run.returncode, json.loads(run.stdout)["verdict"]) == (0, "verified"), run.stdout[-2000:]
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth.realworld_runner import STATUS_MATCH, run_file
    assert run_file(path, 2).status == STATUS_MATCH


def test_ranks_that_block_each_other_on_gloo_confirm_a_simulated_raise_without_waiting_for_the_timeout(tmp_path):
    # the simulated group lets each rank past its receive and raises at the send to itself; on gloo every rank
    # blocks in its receive: the real run fails too, by hanging, and says so within seconds, not at the timeout
    code, body = translate(tmp_path, """
        def forward(x, w):
            rank, world = dist.get_rank(), dist.get_world_size()
            mine = x @ w
            if world == 1:
                return mine
            theirs = torch.empty_like(mine)
            dist.recv(theirs, src=(rank + 1) % world)
            dist.send(mine, dst=rank)
            return theirs
    """)
    assert code == 1, body
    (error,) = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert error["line"] == 17 and "by hanging instead" in error["message"], error  # the send to itself
    assert body["stats"]["seconds"] < 120, body["stats"]


def test_a_rank_is_hung_only_when_every_unfinished_rank_used_almost_no_cpu_for_the_whole_window():
    from frontends.traced import confirm_child as child

    class Run:
        def __init__(self, world, pid, done=False):
            self.world, self.done, self.process = world, done, type("P", (), {"pid": pid})()

    single, a, b = Run(1, 1, done=True), Run(2, 2), Run(2, 3)
    idle = child._Idle([single, a, b])
    start = idle.started
    assert not idle.hung(start + 1, {2: 1.0, 3: 1.0})           # first seen: their CPU is where they are
    assert not idle.hung(start + 5, {2: 1.0, 3: 1.0})           # quiet, but not for the whole window yet
    assert not idle.hung(start + 12, {2: 1.0, 3: 1.5})          # rank b computed meanwhile: not blocked
    assert not idle.hung(start + 20, {2: 1.0, 3: 1.5})          # b quiet for 8 s only
    assert idle.hung(start + 23, {2: 1.04, 3: 1.53})            # both quiet for 10 s (gloo's polling only)
    busy = child._Idle([Run(1, 4), Run(2, 5)])                   # one device still running: never hung
    assert not busy.hung(busy.started + 60, {5: 1.0}) and not busy.hung(busy.started + 90, {5: 1.0})
    # a rank spinning in gloo (full speed in a collective whose peer never comes) beside a quiet one: once it
    # has used twice the one-device run's CPU (4 s here) and 10 s more since that run ended, it is blocked
    one, quiet, spinning = Run(1, 6, done=True), Run(2, 7), Run(2, 8)
    spin = child._Idle([one, quiet, spinning])
    start = spin.started
    assert not spin.hung(start + 1, {6: 4.0, 7: 1.0, 8: 1.0})
    assert not spin.hung(start + 12, {6: 4.0, 7: 1.0, 8: 12.0})   # quiet for 11 s, the other at 11 CPU s: computing
    assert not spin.hung(start + 18, {6: 4.0, 7: 1.0, 8: 18.0})   # 17 CPU s since: under 2 x 4 + 10
    assert spin.hung(start + 20, {6: 4.0, 7: 1.0, 8: 20.0})       # 19 CPU s since: spinning


PAIR_EXCHANGE = """
    def forward(x, w):
        rank, world = dist.get_rank(), dist.get_world_size()
        partner = rank + 1 - 2 * (rank % 2)
        mine = x.chunk(world, dim=0)[rank] @ w
        if world == 1:
            return mine + mine
        theirs = torch.empty_like(mine)
        {exchange}
        return mine + theirs
"""


@pytest.mark.parametrize("ordered", [False, True, "self"])
def test_a_deadlock_is_the_finding_even_where_the_ranks_outputs_also_have_another_shape(tmp_path, ordered):
    # simulated ranks never block, so they return (a piece: a shape finding); real ranks that both receive
    # first never return at all: the deadlock is the finding, the shape a note. Ordered by parity, no deadlock.
    # Rank 0 receiving from itself: gloo raises there (no rank is connected to itself), the finding.
    exchange = ("if rank % 2:\n            dist.recv(theirs, src=partner)\n            dist.send(mine, dst=partner)\n"
                "        else:\n            dist.send(mine, dst=partner)\n            dist.recv(theirs, src=partner)"
                if ordered is True else f"dist.recv(theirs, src={'0' if ordered else 'partner'})\n"
                                        f"        dist.send(mine, dst=partner)")
    code, body = translate(tmp_path, PAIR_EXCHANGE.format(exchange=exchange))
    assert code == 1, body
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    if ordered == "self":
        assert (first["check"], first["line"]) == ("p2p", 17), first
        assert "itself as its peer" in first["message"] and "reproduced by torch" in first["message"], first
        assert any("values not compared" in d["message"] and "has shape" in d["message"]
                   for d in body["diagnostics"]), body["diagnostics"]
    elif ordered:
        assert first["check"] == "equivalence" and "has shape" in first["message"], first
        # shown because real gloo ranks return the piece too
        assert "reproduced by torch on 2 gloo ranks: output 0 has shape (2, 8) on rank 0, (4, 8)" in first["message"]
        assert not any(d["check"] == "deadlock" for d in body["diagnostics"]), body["diagnostics"]
    else:
        assert (first["check"], first["line"], first["repair_line"]) == ("deadlock", 17, 17), first
        assert any("values not compared: some ranks never finish" in d["message"] and "has shape" in d["message"]
                   for d in body["diagnostics"]), body["diagnostics"]


def test_a_shape_the_simulated_ranks_return_is_shown_only_when_real_ranks_return_it_too():
    import numpy as np

    from frontends.traced.confirm import _shape_on_ranks
    from verifier.confirmation import AGREES, NOT_RUN, REPRODUCED

    one = {"output 0": np.zeros((8, 4))}
    pieces = _shape_on_ranks("output 0", [one, {"output 0": np.zeros((4, 4))}, {"output 0": np.zeros((4, 4))}], 2, 0.0)
    assert (pieces.outcome, pieces.rank) == (REPRODUCED, 0) and "(4, 4) on rank 0, (8, 4) on one device" in pieces.detail
    whole = _shape_on_ranks("output 0", [one, one, one], 2, 0.0)
    assert whole.outcome == AGREES and "has the one-device shape (8, 4) on every rank" in whole.detail
    assert _shape_on_ranks("output 0", [one, one, {}], 2, 0.0).outcome == NOT_RUN
