"""User code is isolated: data-only answers, its own namespaces, nothing outlives the tool."""
from __future__ import annotations

import math
import os
import pickle
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from frontends import wire
from frontends import sandbox
from frontends.sandbox import isolation, run_python
from frontends.traced.failure import TraceFailure
from verifier.ir import Op, Span, TensorSpec
from verifier.placements import Partial, Replicate, Shard
from verifier.traced_ir import Comparison, TracedProgram

ROOT = Path(__file__).resolve().parents[2]
CARRIED = (TracedProgram, TraceFailure, Comparison, Op, Span, TensorSpec, Shard, Replicate, Partial)
namespaces_only = pytest.mark.skipif(isolation() != "namespaces", reason="Linux namespaces are not available here")


def _program() -> TracedProgram:
    spec = TensorSpec("x", (4, "H"), "f32", (Shard(0), Replicate()), Span(3, "m.py"))
    op = Op(("y",), "all_reduce", ("x",), {"group": (0, 1), "op": Partial("sum"), "scale": math.inf}, Span(7))
    comparison = Comparison("output 0", "output", "y", ("y", None), (((0, 4), (0, 2)), None))
    return TracedProgram(2, {"tp": 2}, (spec,), (op,), ((op,), (op,)), (comparison,), ("assumed",),
                         pinned={"x@rank1": np.arange(6, dtype=np.float32).reshape(2, 3), "n": (1, 2)})


def _child(code: str, **options):
    bootstrap = "from frontends.sandbox import enter_child, result_channel\nchannel = result_channel()\nenter_child()\n"
    return run_python(["-c", bootstrap + textwrap.dedent(code)], extra_env={"PYTHONPATH": str(ROOT)}, **options)


def test_a_recording_crosses_the_channel_unchanged_with_its_arrays():
    program = _program()
    (back,), error = wire.decode_stream(wire.encode(program), CARRIED)
    assert error is None and back.reference == program.reference and back.comparisons == program.comparisons
    assert back.ranks[0][0].attrs["scale"] == math.inf and back.pinned["n"] == (1, 2)
    np.testing.assert_array_equal(back.pinned["x@rank1"], program.pinned["x@rank1"])
    assert back.pinned["x@rank1"].dtype == np.float32
    wire.check_types(back)


@pytest.mark.parametrize("data, reason", [
    (pickle.dumps({"a": 1}), "bad magic"),
    (b"VAW1" + (2**62).to_bytes(8, "little"), "over the cap"),
    (b"VAW1" + (40).to_bytes(8, "little") + b"{", "cut off"),
    (wire.encode({"x": 1})[:-1] + b"", "cut off"),
])
def test_bytes_that_are_not_a_message_are_refused_with_a_reason(data, reason):
    values, error = wire.decode_stream(data, CARRIED)
    assert values == [] and reason in str(error)


def test_only_the_allowed_classes_are_built_and_with_their_own_field_types():
    header = b'{"$c":"ChildResult","v":{"returncode":0}}'
    forged = b"VAW1" + len(header).to_bytes(8, "little") + header + bytes(8)
    assert "not a type this reader accepts" in str(wire.decode_stream(forged, CARRIED)[1])
    wrong = TraceFailure("internal", 7, "line")  # type: ignore[arg-type]
    (back,), _ = wire.decode_stream(wire.encode(wrong), CARRIED)
    with pytest.raises(wire.WireError, match="message is a int, not a str"):
        wire.check_types(back)


def test_an_array_pointing_outside_its_data_is_refused():
    data = bytearray(wire.encode(np.zeros(4)))
    data = bytes(data).replace(b'[0,"float64",[4]]', b'[8,"float64",[4]]')
    assert "outside the array data" in str(wire.decode_stream(data)[1])


def test_a_child_answers_through_its_private_channel_only():
    done = _child("import os\nchannel.write(b'answer')\nprint(sorted(k for k in os.environ if 'RESULT' in k))",
                  timeout=30)
    assert done.result == b"answer" and done.stdout.strip() == b"[]"


@namespaces_only
def test_the_child_sees_only_its_own_processes_and_not_the_tool():
    done = _child("""
        import os
        print(os.getpid(), os.getppid(), sorted(p for p in os.listdir('/proc') if p.isdigit()))
    """, timeout=30)
    assert done.stdout.split(b" ", 2)[:2] == [b"1", b"0"] and done.stdout.strip().endswith(b"['1']")


@namespaces_only
def test_the_child_has_loopback_and_no_route_beyond_it():
    done = _child("""
        import socket, _socket
        print(sorted(name for _, name in socket.if_nameindex()))
        try:
            _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM).connect(('198.51.100.7', 9)); print('route')
        except OSError as error:
            print('no route', error.errno)
        server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()
        socket.create_connection(server.getsockname(), timeout=2); print('loopback ok')
    """, timeout=30)
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "['lo']" and lines[1].startswith("no route") and lines[2] == "loopback ok", done.stderr


@namespaces_only
def test_signals_from_the_child_do_not_reach_the_tool():
    before = time.monotonic()
    done = _child("""
        import os, signal
        for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(os.getppid(), sig)
            except OSError:
                pass
        os.kill(-1, signal.SIGKILL)
    """, timeout=30)
    assert done.returncode is not None and time.monotonic() - before < 30


def _alive(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() and \
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(pid))
        except OSError:
            continue
    return found


ESCAPES = """
    import os, subprocess, sys
    sleeper = [sys.executable, '-c', 'import time; time.sleep(120)', {marker!r}]
    subprocess.Popen(sleeper, start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, sleeper)
        os._exit(0)
    for _ in range(30):
        if os.fork() == 0:
            os.execv(sys.executable, sleeper)
    {ending}
"""


@pytest.mark.parametrize("ending", ["pass", "import time; time.sleep(60)"], ids=["exits", "times-out"])
def test_nothing_the_child_started_outlives_it(ending):
    marker = f"va-escape-{os.getpid()}-{time.monotonic_ns()}"
    done = _child(ESCAPES.format(marker=marker, ending=ending), timeout=6)
    assert done.timed_out is (ending != "pass")
    time.sleep(0.5)
    assert _alive(marker) == []


def test_without_namespaces_the_child_still_dies_with_what_it_started_at_the_timeout(monkeypatch):
    monkeypatch.setattr(sandbox, "isolation", lambda: "process")
    marker = f"va-escape-{os.getpid()}-{time.monotonic_ns()}"
    done = _child(ESCAPES.format(marker=marker, ending="import time; time.sleep(60)"), timeout=6)
    assert done.timed_out and done.isolation == "process"
    time.sleep(0.5)
    assert _alive(marker) == []


def test_a_child_that_stops_itself_ends_by_the_timeout():
    before = time.monotonic()
    done = _child("import os, signal, time\nos.kill(os.getpid(), signal.SIGSTOP)\ntime.sleep(60)", timeout=3)
    assert done.timed_out and time.monotonic() - before < 20


def test_a_child_printing_without_end_is_read_in_bounded_memory():
    done = _child("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", timeout=3)
    assert done.timed_out and len(done.stdout) <= sandbox.OUTPUT_KEPT


FORGING_FILE = '''
import os
import pickle

import torch
import torch.distributed as dist


class Marker:
    def __reduce__(self):
        return (open, ({marker!r}, "w"))


for fd in range(3, 64):
    try:
        if os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
            os.write(fd, pickle.dumps(Marker()))
    except OSError:
        pass


def example_inputs():
    return (torch.randn(4, 8),)


def forward(x):
    dist.all_reduce(x)
    return x
'''


@pytest.mark.torch
def test_a_file_forging_the_tracers_answer_gets_unsupported_and_runs_nothing_here(tmp_path):
    pytest.importorskip("torch")
    import json
    import subprocess

    marker = tmp_path / "PARENT_RAN"
    (tmp_path / "m.py").write_text(FORGING_FILE.format(marker=str(marker)))
    done = subprocess.run([sys.executable, "-m", "verify_agent", "translate", "m.py", "--format", "json"],
                          cwd=tmp_path, capture_output=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    document = json.loads(done.stdout)
    assert not marker.exists()
    assert done.returncode == 3 and document["verdict"] == "unsupported"
    assert any("could not be read" in d["message"] for d in document["diagnostics"])


def test_the_tool_marks_itself_not_dumpable_so_its_environment_is_not_readable_by_its_user():
    import subprocess

    code = ("import ctypes; from frontends.sandbox import harden_parent; harden_parent(); "
            "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")  # PR_GET_DUMPABLE
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip() == b"0", done.stderr


def test_a_child_that_never_reads_its_input_cannot_block_the_tool():
    before = time.monotonic()
    done = _child("import time\ntime.sleep(60)", timeout=3, input=b"x" * (8 * 2**20))
    assert done.timed_out and time.monotonic() - before < 20
