"""Two runs beyond the 2-rank proof.

* Without ``--mesh`` the code also runs on 4 simulated ranks, checked without the proof (timing,
  and values on random inputs): a bug that needs more than 2 ranks is found there, marked as such.
* A random draw seeded by the rank gives a rank numbers of its own: it becomes an input of that
  rank alone, concrete checks use the numbers each run really drew, and the verdict follows them.

Each case's verdict was confirmed with real gloo runs (1 vs 2 and 4 ranks) when it was written.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import warm_cli

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
HEADER = """
    import torch
    import torch.distributed as dist


    def example_inputs():
        return (torch.randn(8, 4),)

"""
BODY_FIRST_LINE = 9   # line of the first line of a body below in the written file


def translate(tmp_path: Path, body: str, *extra: str) -> tuple[int, dict]:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(HEADER) + textwrap.dedent(body).lstrip("\n"))
    run = warm_cli.run(["translate", str(path), "--format", "json", *extra], cwd=REPO, timeout=240)
    return run.returncode, json.loads(run.stdout)


def errors(body: dict) -> list[dict]:
    return [d for d in body["diagnostics"] if d["severity"] == "error"]


GATHER_HALF_INDEX = """
    def forward(x):
        world, rank = dist.get_world_size(), dist.get_rank()
        piece = x.chunk(world, dim=0)[rank % 2].contiguous()  # right only while world == 2
        pieces = [torch.empty_like(piece) for _ in range(world)]
        dist.all_gather(pieces, piece)
        return torch.cat(pieces)
"""


def test_a_bug_that_needs_four_ranks_is_found_on_the_simulated_four(tmp_path):
    code, body = translate(tmp_path, GATHER_HALF_INDEX)
    assert code == 1, body
    found = errors(body)
    assert found and all(d["message"].startswith("on 4 simulated ranks:") for d in found), found
    assert body["scaled"]["world"] == 4


def test_an_explicit_mesh_checks_only_that_mesh(tmp_path):
    code, body = translate(tmp_path, GATHER_HALF_INDEX, "--mesh", "tp=2")
    assert code == 0, body
    assert "scaled" not in body


def test_a_correct_program_says_what_was_checked_on_four_ranks(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x):
            world, rank = dist.get_world_size(), dist.get_rank()
            piece = x.chunk(world, dim=0)[rank].contiguous()
            pieces = [torch.empty_like(piece) for _ in range(world)]
            dist.all_gather(pieces, piece)
            return torch.cat(pieces)
    """)
    assert code == 0, body
    (note,) = [d for d in body["diagnostics"] if d["check"] == "scale"]
    assert note["message"].startswith("also run on 4 simulated ranks: timing proven")
    assert "random inputs (evaluated, not proven)" in note["message"]
    assert body["scaled"]["passes"]["temporal"] == "proven"


def test_sizes_that_do_not_split_four_ways_fail_on_four_ranks(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x):
            world, rank = dist.get_world_size(), dist.get_rank()
            piece = x[:6].chunk(world, dim=0)[rank].contiguous()   # 6 rows: 3 chunks when world == 4
            pieces = [torch.empty_like(piece) for _ in range(world)]
            dist.all_gather(pieces, piece)
            return torch.cat(pieces)
    """)
    assert code == 1, body
    (error,) = errors(body)
    assert error["message"].startswith("on 4 simulated ranks: rank 3 of 4 raises where the single-device run does not")
    assert error["line"] == BODY_FIRST_LINE + 2


def test_noise_seeded_by_the_rank_is_a_violation_at_the_draw(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x):
            torch.manual_seed(dist.get_rank())
            noise = torch.rand(8, 4)
            return x + noise
    """, "--mesh", "tp=2")
    assert code == 1, body
    (error,) = errors(body)
    assert error["line"] == BODY_FIRST_LINE + 2, error
    assert "random draw" in error["message"]
    assert any("gives other numbers on rank 1" in d["message"] for d in body["diagnostics"])


def test_noise_seeded_alike_on_every_rank_verifies(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x):
            torch.manual_seed(0)
            noise = torch.rand(8, 4)
            return x + noise
    """, "--mesh", "tp=2")
    assert code == 0, body


def test_a_rank_seeded_draw_the_result_does_not_read_verifies(tmp_path):
    code, body = translate(tmp_path, """
        def forward(x):
            torch.manual_seed(dist.get_rank())
            unused = torch.rand(3)
            return x * 2
    """, "--mesh", "tp=2")
    assert code == 0, body
