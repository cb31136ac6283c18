"""The lifter's CUDA stand-in (tir_lifter/capture.py) for files that draw and check on ``cuda``."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch


def test_a_cuda_generator_is_a_cpu_generator_that_seeds_the_same_draws():
    torch = pytest.importorskip("torch")
    from tir_lifter.capture import _cpu_generator_class
    generator_class = _cpu_generator_class(torch)
    generator = generator_class(device="cuda").manual_seed(42)
    assert isinstance(generator, torch.Generator) and generator.device.type == "cpu"
    assert torch.equal(torch.randn(4, generator=generator),
                       torch.randn(4, generator=torch.Generator().manual_seed(42)))


def test_large_cuda_tensors_are_meta_and_an_equality_check_on_them_lets_the_run_go_on():
    torch = pytest.importorskip("torch")
    from tir_lifter.capture import _MetaDevice
    with _MetaDevice():
        generator = torch.Generator().manual_seed(0)
        big = torch.randn(512, 512, device="cuda", generator=generator)
        small = torch.arange(8, device="cuda")
        assert big.device.type == "meta" and small.device.type == "cpu"
        assert torch.equal(torch.isinf(big), torch.isinf(big)) is True
        assert torch.equal(small, small + 1) is False  # real values are still compared
