"""Shared pytest configuration: markers, and one temporary directory for the whole run.

Every process a test starts (ground-truth ranks, the tool's CLI, benchmark scripts) inherits
``TMPDIR`` from this one, so what they leave there is removed when the run ends: a rank killed
after importing a library that makes a directory at import (megatron-core imports wandb, which
removes its directories only at a clean interpreter exit) would otherwise leave it in the
machine's temporary directory.
"""
import os
import shutil
import sys
import tempfile

_TEMP_VARIABLES = ("TMPDIR", "TMP", "TEMP")
_run_temp: str | None = None


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running tests")
    config.addinivalue_line("markers", "torch: needs torch installed (real torch.distributed with gloo)")
    config.addinivalue_line("markers", "tilelang: needs tilelang installed")
    config.addinivalue_line("markers", "realcode: needs the real libraries of the realcode extra installed")
    global _run_temp
    _run_temp = tempfile.mkdtemp(prefix="verify-agent-tests-")
    os.environ.update(dict.fromkeys(_TEMP_VARIABLES, _run_temp))
    tempfile.tempdir = None   # this process's own temporary files go there too


def pytest_unconfigure(config):
    if _run_temp is None:
        return
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        shutil.rmtree(_run_temp, ignore_errors=True)
        return
    # multiprocessing removes its own directory in there when the interpreter exits (finalizer priority
    # -100, after pytest is done): removing the whole directory first made that print a traceback
    util.Finalize(None, shutil.rmtree, args=(_run_temp,), kwargs={"ignore_errors": True}, exitpriority=-101)
