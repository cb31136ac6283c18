"""The HF plan benchmark's tiny configs: the architectures whose tiny config raised or was too large
(multimodal rope sections, per-layer lists, q_lora_rank, a composite config, full-size vision and audio
towers) build on one rank, run forward and backward, and stay small."""
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.realcode
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import hf_tp_harness as hf  # noqa: E402

FORMERLY_FAILING = ["gemma3n_text", "qwen2_vl_text", "llama4", "longcat_flash", "phi4_multimodal", "qwen3_next"]


@pytest.mark.parametrize("model_type", FORMERLY_FAILING)
def test_the_tiny_config_builds_runs_backward_and_stays_small(model_type):
    config_name = dict(hf.plan_architectures())[model_type]
    torch.set_default_dtype(torch.float64)
    try:
        model, (ids,) = hf.build(model_type, config_name, 1)
        out = hf.logits_of(model)(ids)
        out.sum().backward()
    finally:
        torch.set_default_dtype(torch.float32)
    assert out.shape[:2] == (1, 8) and torch.isfinite(out).all()
    assert sum(p.numel() for p in model.parameters()) < 60_000
    assert any(p.grad is not None for p in model.parameters())
