"""The realcode ground truth stops a rank by the CPU time it used, not by the wall clock: a slow entry
on a loaded machine still gets its result, a spinning one is stopped."""
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from realcode_groundtruth import wait_cpu  # noqa: E402


def test_a_rank_spinning_past_its_cpu_budget_is_stopped():
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    wait_cpu([spin], budget=0.5, poll=0.05)
    assert spin.returncode is not None and spin.returncode < 0   # killed, not finished


def test_a_rank_waiting_longer_than_its_budget_on_the_wall_clock_is_not_stopped():
    started = time.monotonic()
    waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    wait_cpu([waiting], budget=1.0, poll=0.05)
    assert waiting.returncode == 0
    assert time.monotonic() - started >= 1.5
