"""The tracing frontend's sandbox and options: environment, entry parsing, sizes, the CLI ending."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from frontends.traced.correspondence import LayoutError, parse_layouts
from frontends.traced.entries import EntryError, parse_entry
from frontends.traced.runner import scrubbed_environment
from frontends.traced.sizes import reduced_sizes


def test_the_child_environment_has_no_secrets_or_proxies():
    env = scrubbed_environment({"OPENAI_API_KEY": "k", "HF_TOKEN": "t", "DB_PASSWORD": "p", "AWS_REGION": "r",
                                "MY_SECRET": "s", "https_proxy": "http://proxy", "HOME": "/home/u", "PATH": "/bin"})
    assert set(env) >= {"HOME", "PATH"}
    assert not {"OPENAI_API_KEY", "HF_TOKEN", "DB_PASSWORD", "AWS_REGION", "MY_SECRET", "https_proxy"} & set(env)
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_entry_arguments_are_literals_only():
    assert parse_entry("Block(hidden=16, ffn=64)") == ("Block", (), {"hidden": 16, "ffn": 64})
    assert parse_entry("forward") == ("forward", (), {})
    with pytest.raises(EntryError):
        parse_entry("Block(hidden=__import__('os').getpid())")
    with pytest.raises(EntryError):
        parse_entry("Block(16); print(1)")


def test_param_layouts_are_parsed_not_evaluated():
    assert parse_layouts(["fc1.weight=Shard(0)", "norm.weight=Replicate"]) == {
        "fc1.weight": "Shard(0)", "norm.weight": "Replicate"}
    with pytest.raises(LayoutError):
        parse_layouts(["fc1.weight=__import__('os')"])


def test_reduced_sizes_stay_distinct_divisible_and_at_least_two_per_rank():
    original = {"BATCH": 2, "SEQ": 8, "HIDDEN": 16, "FFN": 64, "HEADS": 16}
    sizes = {**original, **reduced_sizes(original, 2)}
    assert sizes["SEQ"] // 2 >= 2 and all(v % 2 == 0 for k, v in sizes.items() if k != "BATCH")
    assert sizes["HIDDEN"] == sizes["HEADS"]                      # equal stays equal
    assert len({sizes["SEQ"], sizes["HIDDEN"], sizes["FFN"]}) == 3  # distinct stays distinct
    assert sizes["FFN"] % sizes["HIDDEN"] == 0                     # a divisor stays a divisor
    assert all(sizes[k] <= original[k] for k in original)


def test_reduced_sizes_keep_a_product_of_two_constants_a_product():
    original = {"VOCAB": 56, "HIDDEN": 16, "BATCH": 7, "SEQ": 8}   # randperm(VOCAB).view(BATCH, SEQ)
    sizes = {**original, **reduced_sizes(original, 2)}
    assert sizes["VOCAB"] == sizes["BATCH"] * sizes["SEQ"] < 56
    assert len(set(sizes.values())) == 4


@pytest.mark.torch
def test_translate_names_the_users_line_when_the_code_raises(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "broken.py"
    path.write_text(textwrap.dedent("""
        import torch
        import torch.distributed as dist

        def example_inputs():
            return (torch.randn(4, 6),)

        def forward(x):
            y = x * 2
            return y @ torch.randn(5, 3)
    """))
    completed = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(path), "--format", "json"],
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 2, completed.stderr[-2000:]
    document = json.loads(completed.stdout)
    assert document["verdict"] == "input-error"
    text = json.dumps(document)
    assert "broken.py:10" in text and "RuntimeError" in text
    assert "Traceback" not in completed.stderr
