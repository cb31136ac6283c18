"""Running `verify-agent translate` on a case of tests/traced/cases as a user would, for the tests."""
from __future__ import annotations

import json
import os
import runpy
import shutil
import socket
import sys
import tempfile
import traceback
from pathlib import Path

import warm_cli

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"


def translate(name: str, *extra: str, timeout: float = 300) -> tuple[int, dict]:
    """(exit code, JSON report) of ``translate`` on case ``name`` with ``extra`` arguments: the command a user
    runs, forked from a server that imported it once (warm_cli.py)."""
    run = warm_cli.run(["translate", str(CASES / name), *extra, "--format", "json"], cwd=REPO, timeout=timeout)
    return run.returncode, json.loads(run.stdout)


def first_error(name: str, *extra: str) -> dict:
    """The first error of ``translate`` on case ``name``, which must be a violation."""
    code, body = translate(name, *extra)
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    return [d for d in body["diagnostics"] if d["severity"] == "error"][0]


_RANK = """
import json, os, sys, warnings, torch, torch.distributed as dist
warnings.simplefilter("ignore")
rank, world, port, cases, name, dtype = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5],
                                        sys.argv[6])
torch.set_default_dtype(getattr(torch, dtype))
if len(sys.argv) > 7:  # CUDA requests answered on the CPU, as a CPU run of a GPU script needs
    sys.path.insert(0, sys.argv[7])
    from frontends.traced.cuda_standin import map_cuda_to_cpu
    map_cuda_to_cpu()
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
sys.path.insert(0, cases)
case = __import__(name)
torch.manual_seed(7)
out = case.forward(*case.example_inputs())
print(json.dumps(out.detach().double().tolist()), flush=True)
dist.barrier()
dist.destroy_process_group()   # gloo's threads joined before exit ("terminate called without an active exception")
"""


def gloo_outputs(name: str, world: int, cuda_on_cpu: bool = False, dtype: str = "float32") -> list:
    """Each rank's output of case ``name``'s ``forward(*example_inputs())`` on ``world`` plain gloo ranks
    (grad mode on: a case may run backward inside its entry), as nested lists of floats.  ``cuda_on_cpu``:
    CUDA requests (megatron-core's RNG tracker) answered on the CPU by the tool's stand-in, the
    environment both the tool's runs and these run in.  ``dtype``: torch's default dtype in the ranks."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [[str(r), str(world), str(port), str(CASES), name[:-3], dtype, *([str(REPO)] if cuda_on_cpu else [])]
            for r in range(world)]
    return [json.loads(out) for out in warm_ranks(_RANK, argv)]


def _rank_main(script: str, argv: list[str], out_path: str, err_path: str) -> None:
    """In a forked worker: the rank program ``script`` run as ``python script *argv`` runs it (``__main__``,
    ``sys.argv``), what it prints written to ``out_path`` and an exception's traceback to ``err_path``
    (exit code 1)."""
    sys.argv = [script, *argv]
    with open(out_path, "w") as out, open(err_path, "w") as err:
        sys.stdout = out
        try:
            runpy.run_path(script, run_name="__main__")
        except BaseException:
            err.write(traceback.format_exc())
            err.flush()
            out.flush()
            os._exit(1)
        out.flush()


def warm_ranks(code: str, argv_per_rank: list[list[str]], timeout: float = 300.0) -> list[str]:
    """Each rank's printed output of the rank program ``code`` (what ``python -c code *argv`` prints), the
    ranks started together as processes forked from the ground-truth runners' server, which imported
    torch once (tests/groundtruth/runner.py ``worker_context``), instead of one new interpreter importing
    torch per rank (about 2 CPU seconds each).  Each rank is a fresh fork of that clean image: no state
    is shared between ranks or runs.  A rank that fails or outlives ``timeout`` fails the caller with its
    traceback."""
    if str(REPO / "tests") not in sys.path:
        sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    ctx = gt.worker_context()
    folder = tempfile.mkdtemp(prefix="ranks-")
    script = os.path.join(folder, "rank.py")
    Path(script).write_text(code)
    files = [(os.path.join(folder, f"{r}.out"), os.path.join(folder, f"{r}.err")) for r in range(len(argv_per_rank))]
    ranks = [ctx.Process(target=_rank_main, args=(script, argv, out, err))
             for argv, (out, err) in zip(argv_per_rank, files)]
    for process in ranks:
        process.start()
    try:
        for process in ranks:
            process.join(timeout)
        for process, (_, err) in zip(ranks, files):
            assert process.exitcode == 0, f"rank exit {process.exitcode}: " + (
                Path(err).read_text()[-2000:] if os.path.exists(err) else "")
        return [Path(out).read_text() for out, _ in files]
    finally:
        for process in ranks:
            if process.is_alive():
                process.kill()
                process.join()
        shutil.rmtree(folder, ignore_errors=True)


def marked_line(path: Path) -> int:
    """The line of ``path`` marked ``# the bug``."""
    (line,) = [n for n, text in enumerate(path.read_text().splitlines(), 1) if "# the bug" in text]
    return line


MATCH, MISMATCH, RAISES = "match", "mismatch", "error"   # the ground-truth runner's statuses


def gloo_statuses(names, world: int = 2, timeout: float = 60.0) -> dict[str, tuple[str, str]]:
    """Each case file's status in plain gloo runs of ``world`` ranks against one rank (the real-world
    ground-truth runner: MATCH, MISMATCH or RAISES), with the tail of its error."""
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    assert (MATCH, MISMATCH, RAISES) == (rw.STATUS_MATCH, rw.STATUS_MISMATCH, rw.STATUS_ERROR)
    results = rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=timeout), world) for name in names])
    return {name: (result.status, (result.error or "")[-300:]) for name, result in zip(names, results)}
