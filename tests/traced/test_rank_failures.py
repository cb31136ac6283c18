"""A rank that raises where the single-device run does not.

A shape error is evidence (simulated ranks compute shapes exactly): a violation at its line.
Any other exception of a rank stays an input error naming the line (values read after a
simulated collective are not real, so they prove nothing).
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
    assert error["line"] == 12 and "raises where the single-device run does not" in error["message"]


def test_another_exception_of_a_rank_is_an_input_error_naming_its_line(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x, w):
            if dist.get_rank() == 1:
                raise ValueError("rank 1 refuses")
            return x @ w
    """)
    assert code == 2, body
    assert "rank 1 refuses" in json.dumps(body)


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
