"""Ground truth for benchmarks/realcode.py: each entry run for real with torch.distributed (gloo over
127.0.0.1, CPU) on 1 rank and on 2 and 4 ranks, outputs and gradients compared.

One worker process per rank of each world size runs every selected entry in turn (a fresh process
group per entry on one TCPStore).  The 1-rank run goes first and saves its parameter values; a rank
of an N-rank run copies its piece of each parameter from them (DTensor placements, Megatron's
partition_dim/stride, or a 1/N block of the one dim that shrank: the rules of the real-world gallery's
runner, tests/groundtruth/realworld_runner.py).  An input declared ``Shard(d)`` is cut into rank
blocks along d, an output declared ``Shard(d)`` is gathered along d before it is compared; everything
else must equal the one-rank value on every rank (input gradients: the same on every rank, or
disjoint pieces that sum to it).  Default dtype float64; ``cuda`` requests run on CPU.
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from frontends.sandbox import cpu_seconds_of  # noqa: E402
from groundtruth import realworld_runner as rw  # noqa: E402
from groundtruth import runner as base  # noqa: E402


@dataclass
class Truth:
    status: str                      # "agree" | "differ" | "not-runnable"
    worlds: dict = field(default_factory=dict)   # world -> {"status", "details": [...], "error"}
    error: str | None = None

    def to_json(self) -> dict:
        return {"status": self.status, "worlds": self.worlds, "error": self.error}


# ----------------------------------------------------------------------------------------
# Parent side
# ----------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(keys: list[str], world: int, outdir: Path, timeout: float, extra_path: str | None = None,
              attempts: int = 3) -> None:
    """Run every entry of ``keys`` on ``world`` gloo ranks; a group whose rank process died (gloo aborts a
    process on some mismatches) stops, and the entries it did not finish run again in a fresh group."""
    todo = list(keys)
    for _ in range(attempts):
        run_group(todo, world, outdir, timeout, extra_path)
        left = [k for k in todo if not all(_finished(outdir / f"{_safe(k)}_w{world}_r{r}.json") for r in range(world))]
        if not left or left == todo:
            return
        todo = left


def _finished(path: Path) -> bool:
    result = _load(path)
    return result is not None and "infra" not in result


def run_group(keys: list[str], world: int, outdir: Path, timeout: float, extra_path: str | None = None) -> None:
    """Run every entry of ``keys`` on ``world`` gloo ranks (one process per rank)."""
    port = free_port() if world > 1 else 0
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    if extra_path:
        env["REALCODE_EXTRA_PATH"] = extra_path
    procs = []
    for rank in range(world):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--world", str(world), "--rank", str(rank),
               "--port", str(port), "--outdir", str(outdir), *keys]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=open(outdir / f"w{world}_r{rank}.log", "w")))
    wait_cpu(procs, timeout * max(1, len(keys)) + STARTUP_CPU)


STARTUP_CPU = 60.0   # CPU seconds a rank may spend importing torch and the libraries before its entries
WALL_FACTOR = 8.0    # the wall clock's outer bound, as a multiple of the CPU budget


def wait_cpu(procs: list, budget: float, poll: float = 0.5) -> None:
    """Wait for the rank processes; stop one that has used more than ``budget`` CPU seconds.  CPU time,
    not the wall clock: on a machine at load 40 a rank gets a fortieth of a core, and a wall-clock limit
    took slow entries for ones that gave no result.  A rank waiting on a peer uses almost none (gloo's own
    60 s timeout ends that wait); ``WALL_FACTOR`` times the budget on the wall clock is the outer bound."""
    deadline = time.monotonic() + WALL_FACTOR * budget
    while any(p.poll() is None for p in procs):
        late = time.monotonic() > deadline
        for p in procs:
            if p.poll() is None and (late or cpu_seconds_of(p.pid) > budget):
                p.kill()
                p.wait()
        time.sleep(poll)


def compare(key: str, outdir: Path, world: int) -> dict:
    ref = _load(outdir / f"{_safe(key)}_w1_r0.json")
    if ref is None or "error" in ref:
        return {"status": "not-runnable", "error": "reference (1 rank): " + (ref or {}).get("error", "no result")}
    ranks = [_load(outdir / f"{_safe(key)}_w{world}_r{r}.json") for r in range(world)]
    if any(r is None or "infra" in r for r in ranks):   # a rank died or was killed: no evidence either way
        return {"status": "not-runnable", "error": f"{world} ranks: some rank process died or gave no result "
                                                   f"within the time limit"}
    errs = [r["error"] for r in ranks if "error" in r]
    if errs:
        return {"status": "differ", "error": f"{world} ranks raised: {errs[0][-600:]}"}
    arrays = lambda d: {k: np.asarray(v["data"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in d["arrays"].items()}  # noqa: E731
    ra = arrays(ref)
    pa = [arrays(r) for r in ranks]
    rtol, atol = rw._tolerance(list(ra.values()))
    details = []
    for name, meta in ref["meta"].items():
        per_rank = [a.get(name) for a in pa]
        if any(x is None for x in per_rank):
            details.append((name, False, math.inf, "missing on some rank"))
            continue
        kind, dim = meta["kind"], meta.get("dim")
        refv = ra[name]
        if dim is not None:      # a declared Shard(d): the ranks' pieces gathered along d
            try:
                full = np.concatenate(per_rank, axis=dim)
            except ValueError:
                details.append((name, False, math.inf, f"pieces do not concatenate along {dim}"))
                continue
            same, d = base._diff(full, refv, rtol, atol)
            details.append((name, same, d, f"gathered along {dim}"))
        elif kind == "input-grad":
            det = base._compare_input_grad(name, refv, per_rank, rtol, atol)
            details.append((name, det.matches, det.max_abs_diff, det.note))
        elif kind == "param-grad":
            layout = tuple(ranks[0]["meta"][name]["layout"])
            det = rw._compare_param_grad(name, layout, refv, per_rank, rtol, atol)
            details.append((name, det.matches, det.max_abs_diff, det.note))
        else:
            det = base._compare_each_rank(name, refv, per_rank, rtol, atol)
            details.append((name, det.matches, det.max_abs_diff, det.note or "every rank"))
    extra = set().union(*(set(r["meta"]) for r in ranks)) - set(ref["meta"])
    for name in sorted(extra):
        details.append((name, False, math.inf, "only on the ranks"))
    ok = all(d[1] for d in details)
    return {"status": "agree" if ok else "differ",
            "details": [{"name": n, "same": s, "max_abs_diff": (d if math.isfinite(d) else "inf"), "note": note}
                        for n, s, d, note in details]}


def truth_of(key: str, outdir: Path, worlds=(2, 4)) -> Truth:
    per = {w: compare(key, outdir, w) for w in worlds}
    if any(v["status"] == "not-runnable" for v in per.values()):
        return Truth("not-runnable", per, next(v["error"] for v in per.values() if v["status"] == "not-runnable"))
    status = "agree" if all(v["status"] == "agree" for v in per.values()) else "differ"
    return Truth(status, per)


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in key)


# ----------------------------------------------------------------------------------------
# Worker side (one process per rank)
# ----------------------------------------------------------------------------------------

def _worker(world: int, rank: int, port: int, outdir: Path, keys: list[str]) -> None:
    from datetime import timedelta

    extra = os.environ.get("REALCODE_EXTRA_PATH")
    if extra:
        sys.path.insert(0, extra)
    import warnings

    warnings.simplefilter("ignore")
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port or 29500))
    if "lo" in {name for _, name in socket.if_nameindex()}:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    rw._map_cuda_to_cpu()
    store = dist.HashStore() if world == 1 else dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0,
                                                              timeout=timedelta(seconds=300))
    import realcode_entries as entries

    for i, key in enumerate(keys):
        path = outdir / f"{_safe(key)}_w{world}_r{rank}.json"
        try:
            dist.init_process_group("gloo", store=dist.PrefixStore(f"e{i}", store), rank=rank, world_size=world,
                                    timeout=timedelta(seconds=60))
        except BaseException:   # a peer died: this group can run nothing more (the parent starts another)
            path.write_text(json.dumps({"infra": traceback.format_exc()[-2000:]}))
            return
        try:
            result = _run_entry(entries.by_key(key), world, rank, outdir)
        except BaseException:
            result = {"error": traceback.format_exc()[-3000:]}
        finally:
            entries.teardown()
            try:
                dist.destroy_process_group_by_runner()
            except Exception:
                pass
        path.write_text(json.dumps(result))


def _arr(t) -> dict:
    a = rw._to_numpy(t) if not isinstance(t, np.ndarray) else t
    a = np.asarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}


def _run_entry(entry, world: int, rank: int, outdir: Path) -> dict:
    import torch

    torch.set_default_dtype(torch.float64)
    entry.setup(world)
    torch.manual_seed(1234)
    made = entry.build(world)
    fn, params = made if isinstance(made, tuple) else (made, _params_of(made))
    with torch.no_grad():
        for _, p in params:
            if p.is_floating_point() and p.dtype != torch.float64 and not rw._is_dtensor(p):
                p.data = p.data.to(torch.float64)
    ref_path = outdir / f"{_safe(entry.key)}_params.npz"
    if world == 1:
        np.savez(ref_path, **{n: rw._to_numpy(p) for n, p in params})
    elif entry.copy_params:
        with np.load(ref_path) as saved:
            rw._copy_reference_values(params, {n: saved[n] for n in saved.files}, rank, world)
    torch.manual_seed(99)
    inputs, local = [], []
    for spec in entry.inputs:
        t = spec.make()
        inputs.append(t)
        piece = t if spec.dim is None else t.chunk(world, dim=spec.dim)[rank]
        if piece.is_floating_point() and spec.grad:
            piece = piece.detach().clone().requires_grad_(True)
        local.append(piece)
    # the entry receives activations (non-leaf tensors, as in training: a library may change them in place)
    out = fn(*[t.clone() if t.requires_grad else t for t in local], **entry.kwargs)
    flat = [(p, t if isinstance(t, torch.Tensor) else torch.tensor(float(t)))
            for p, t in base._flatten(out) if isinstance(t, (torch.Tensor, int, float)) and not isinstance(t, bool)]
    arrays, meta = {}, {}
    loss = None
    for i, (p, t) in enumerate(flat):
        name = f"out{p}"
        dim = entry.out_dim(i)
        arrays[name], meta[name] = _arr(t), {"kind": "output", "dim": dim}
        if t.is_floating_point() and t.requires_grad:
            full_shape = list(rw._full(t).shape)
            if dim is not None:
                full_shape[dim] *= world
            gen = torch.Generator().manual_seed(7919 + i)
            c = torch.randn(full_shape, generator=gen, dtype=torch.float64)
            if dim is not None:
                c = c.chunk(world, dim=dim)[rank]
            term = (rw._full(t) * c.to(t.dtype)).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    rw._finalize_sequence_parallel_grads(params, rw._megatron_state())
    for i, (spec, t) in enumerate(zip(entry.inputs, local)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            name = f"grad[input {spec.name}]"
            arrays[name] = _arr(t.grad if t.grad is not None else torch.zeros_like(t))
            meta[name] = {"kind": "input-grad", "dim": spec.dim}
    for name, kind, layout, g in rw._param_grads(params):
        if g is None:
            continue
        arrays[name], meta[name] = _arr(g), {"kind": "param-grad", "dim": None, "layout": list(layout)}
    return {"arrays": arrays, "meta": meta}


def _params_of(fn) -> list:
    import torch

    if isinstance(fn, torch.nn.Module):
        return list(fn.named_parameters())
    return []


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--outdir", type=Path, required=True)
    ap.add_argument("keys", nargs="+")
    a = ap.parse_args(argv)
    _worker(a.world, a.rank, a.port, a.outdir, a.keys)
    return 0


if __name__ == "__main__":
    sys.exit(main())
