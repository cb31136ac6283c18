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


def test_with_real_data_large_cuda_tensors_have_values_and_lose_them_at_a_kernel_launch():
    torch = pytest.importorskip("torch")
    from tir_lifter.capture import Capture, _MetaDevice, needs_data
    capture = Capture(real_data=True)
    with _MetaDevice(capture, real_data=True):
        x = torch.randn(512, 256, device="cuda")
        out = torch.zeros(512, 256, device="cuda")
        assert x.device.type == "cpu" and torch.nonzero(torch.isnan(x)).numel() == 0
        capture.launched_with([x, out])  # the stand-in kernel computes nothing into out
        assert (out + 1).device.type == "meta" and (out[:4] * 1).device.type == "meta"  # views too
        with pytest.raises(Exception) as raised:
            torch.nonzero(out > 0)
        assert needs_data(f"{type(raised.value).__name__}: {raised.value}")


def test_without_real_data_the_values_of_large_cuda_tensors_are_not_there():
    torch = pytest.importorskip("torch")
    from tir_lifter.capture import Capture, _MetaDevice, needs_data
    with _MetaDevice(Capture()):
        x = torch.randn(512, 256, device="cuda")
        with pytest.raises(Exception) as raised:
            torch.nonzero(torch.isnan(x))
    assert x.device.type == "meta" and needs_data(f"{type(raised.value).__name__}: {raised.value}")


def test_with_real_data_a_product_too_costly_for_the_run_is_made_on_meta():
    torch = pytest.importorskip("torch")
    from tir_lifter.capture import Capture, _MetaDevice
    with _MetaDevice(Capture(real_data=True), real_data=True):
        a = torch.ones(4096, 4096, device="cuda")
        small = torch.ones(512, 256, device="cuda")
        assert a.device.type == "cpu" and (a @ a).device.type == "meta"  # 2 * 4096^3 operations
        assert (small @ small.T).device.type == "cpu"
