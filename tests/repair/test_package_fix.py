"""Repair of a file inside a package: each candidate is traced as the package's own module.

A candidate is written into an overlay of the package (the same directories from the import root,
every other file a link to the original), so ``from .layers import ...`` resolves as it does for the
file itself; a plain temporary copy could not import its siblings.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from frontends.traced.location import locate
from verify_agent.repair.traced_fixes import overlay_root, write_candidate

LAYERS = '''import torch
import torch.distributed as dist


class _CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.clone()
        dist.all_reduce(grad_output)
        return grad_output


def copy_to_region(x):
    return _CopyToRegion.apply(x)
'''

MODEL = '''import torch
import torch.distributed as dist
import torch.nn.functional as F

from .layers import copy_to_region

TOKENS, HIDDEN, FFN = 4, 8, 16


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(copy_to_region(x) @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    return y


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)
'''


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "proj" / "tp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(LAYERS)
    (package / "model.py").write_text(MODEL)
    return package / "model.py"


def test_a_candidate_in_a_package_imports_as_the_packages_module(tmp_path):
    model = _package(tmp_path)
    copy = write_candidate(MODEL + "\n# edited\n", str(model))
    try:
        assert locate(copy).module == "tp.model"
        assert copy.read_text().endswith("# edited\n")
        assert (copy.parent / "layers.py").resolve() == (model.parent / "layers.py").resolve()
        assert model.read_text() == MODEL                      # the original is untouched
    finally:
        shutil.rmtree(overlay_root(copy))
    assert (model.parent / "layers.py").read_text() == LAYERS  # removing the overlay leaves the package


def test_a_script_candidate_is_a_plain_copy(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("x = 1\n")
    copy = write_candidate("x = 2\n", str(script))
    try:
        assert locate(copy).module is None and copy.read_text() == "x = 2\n"
    finally:
        shutil.rmtree(overlay_root(copy))


@pytest.mark.torch
@pytest.mark.slow
def test_missing_reduction_in_a_package_module_gets_a_confirmed_fix(tmp_path):
    pytest.importorskip("torch")
    from verify_agent.repair.commands import find_fixes

    model = _package(tmp_path)
    report, fixes = find_fixes(model, top_k=1)
    assert report.verdict == "violations"
    assert fixes, "no verified fix"
    assert "confirmed on 2 and 4 gloo ranks" in fixes[0].description
    # the reduction goes where the violation names the unreduced value: after the matmul, or at the return
    assert any(form in fixes[0].patched for form in ("dist.all_reduce(y)", "_ReduceFromRanks.apply(y)",
                                                      "    dist.all_reduce(out)\n    return out\n"))
    assert model.read_text() == MODEL
