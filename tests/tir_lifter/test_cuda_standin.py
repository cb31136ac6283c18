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


def test_offsets_made_after_large_inputs_filled_the_budget_are_still_remembered(monkeypatch):
    # the file's large inputs (drawn on the CPU, then moved to cuda) may fill the memory the
    # recorder keeps alive; the sequence offsets and index tables made after them are small and
    # are still remembered, so the kernel's index tensors can be traced to what drew them
    torch = pytest.importorskip("torch")
    from tir_lifter.capture import Capture, _MetaDevice
    monkeypatch.setattr(_MetaDevice, "KEPT_BYTES", 1 << 20)
    capture = Capture()
    with _MetaDevice(capture):
        big = torch.randn(1 << 19)  # 2 MiB on the CPU: the budget of large tensors is spent
        bigger = big * 2  # past that budget: not remembered
        lengths = torch.randint(1, 9, (4,))
        offsets = torch.nn.functional.pad(torch.cumsum(lengths, 0), (1, 0))
    assert id(bigger) not in capture.derivations
    assert capture.derivations[id(offsets)].func.__name__ == "pad"
    assert capture.derivations[id(lengths)].func.__name__ == "randint"
