"""Ground truth for mutants: real gloo runs (CPU) of 1 rank against 2 and 4 ranks, outputs
and gradients, through the project's ground-truth runners (``tests/groundtruth/``).

A mutant is
  agree    every N-rank run returns the 1-rank numbers (outputs; gradients where compared);
  differ   some N-rank run returns other numbers, hangs (the runner's timeout), or raises
           while the 1-rank run does not; or the 1-rank run fails and an N-rank run does
           not fail the same way;
  invalid  the 1-rank run and every N-rank run raise the same exception (the mutant is
           broken Python/torch, not a distributed bug): excluded from the campaign;
  race     the numbers agreed but a ``wait()`` was removed: gloo may finish the collective
           before the early read, so one run proves nothing either way: reported apart;
  unknown  the runner itself gave up: not counted and not cached.

Each rank runs the runners' own ``_execute`` and the comparison is the runners' own
``_compare``; the processes are forked from this (torch-importing) parent, see forked.py.
The runners' public ``run_jobs`` folds "1-rank run failed" into "not runnable" without the
N-rank outcome, and deciding "invalid" needs both.  The timeout is CPU seconds per rank
(forked.py: a hang is ranks that all stop using CPU); a hang is confirmed by a second run
with three times the timeout.  Results are cached by content hash of the mutant, the
runner sources and the settings, so a re-run only runs new mutants.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import forked

REPO = Path(__file__).resolve().parents[2]
GROUNDTRUTH_DIR = REPO / "tests" / "groundtruth"
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))

AGREE, DIFFER, INVALID, RACE, UNKNOWN = "agree", "differ", "invalid", "race", "unknown"
GALLERY, REALWORLD = "gallery", "realworld"
BATCH = 8  # mutants between progress lines and cache writes


@dataclass(frozen=True)
class Request:
    path: str  # the mutant file
    kind: str  # GALLERY (tests/groundtruth/runner.py) or REALWORLD (realworld_runner.py)
    grad: bool  # gallery only: also compare gradients (realworld always does when outputs need grad)
    source_digest: str
    race_possible: bool = False  # a wait() was removed
    lib_path: str | None = None  # an import root put first on the path (a mutated copy of a library)


@dataclass(frozen=True)
class Truth:
    status: str
    reason: str


def _runner_digest(kind: str) -> str:
    names = ["runner.py"] + (["realworld_runner.py"] if kind == REALWORLD else [])
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for p in [GROUNDTRUTH_DIR / n for n in names] + [here / "forked.py", here / "groundtruth.py"]:
        h.update(p.read_bytes() if p.is_file() else b"")
    return h.hexdigest()[:16]


def cache_key(req: Request, worlds: tuple[int, ...], timeout: float) -> str:
    text = json.dumps([req.source_digest, req.kind, req.grad, req.race_possible, list(worlds), timeout,
                       _runner_digest(req.kind)] + ([req.lib_path is not None] if req.lib_path else []))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class Cache:
    def __init__(self, folder: Path | None):
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> Truth | None:
        if self.folder is None or not (self.folder / f"{key}.json").is_file():
            return None
        return Truth(**json.loads((self.folder / f"{key}.json").read_text()))

    def put(self, key: str, truth: Truth) -> None:
        if self.folder is not None and truth.status != UNKNOWN:  # also never caches NOT_RUN
            (self.folder / f"{key}.json").write_text(json.dumps(asdict(truth)))


def ground_truth(requests: list[Request], *, worlds=(2, 4), timeout: float = 8.0, cache: Cache | None = None,
                 parallel: int = 6, progress=None, tick=None, stop_at: float | None = None) -> list[Truth]:
    """One ``Truth`` per request, in order.  Up to ``parallel`` runs at once: a hanging run
    only waits, so hangs of different mutants overlap instead of adding up.  After the
    monotonic time ``stop_at`` no new mutant starts; those left are UNKNOWN ("not run")."""
    cache = cache or Cache(None)
    keys = [cache_key(r, tuple(worlds), timeout) for r in requests]
    truths: dict[int, Truth] = {}
    todo = []
    for i, key in enumerate(keys):
        hit = cache.get(key)
        if hit is not None:
            truths[i] = hit
        else:
            todo.append(i)
    started = time.monotonic()
    for kind in (GALLERY, REALWORLD):
        mine = [i for i in todo if requests[i].kind == kind]
        if not mine:
            continue
        _prepare_parent(kind)
        for i, truth in _schedule(requests, mine, tuple(worlds), timeout, parallel, tick, stop_at):
            truths[i] = truth
            cache.put(keys[i], truth)
            if progress and (len(truths) % BATCH == 0 or len(truths) == len(requests)):
                progress(f"ground truth {len(truths)}/{len(requests)} ({time.monotonic() - started:.0f}s)")
    return [truths[i] for i in range(len(requests))]


NOT_RUN = "not run (time limit of the campaign)"


# ----------------------------------------------------------------------------------------
# Each mutant is a generator of runs: it yields (kind, spec, world, timeout, ref_params),
# receives the outcome, and returns its comparisons; the scheduler interleaves many.

def _schedule(requests, indices, worlds, timeout, parallel, tick=None, stop_at=None):
    waiting = list(indices)
    active = []  # [index, generator, forked.Run]
    while waiting or active:
        if stop_at is not None and time.monotonic() > stop_at:
            for i in waiting:
                yield i, Truth(UNKNOWN, NOT_RUN)
            waiting = []
        while waiting and len(active) < parallel:
            i = waiting.pop(0)
            gen = _steps(requests[i], worlds, timeout)
            result = _advance(gen, None)
            if isinstance(result, Truth):
                yield i, result
            else:
                active.append([i, gen, result])
        progressed = False
        for entry in list(active):
            i, gen, run = entry
            if not run.poll():
                continue
            progressed = True
            result = _advance(gen, run.outcome)
            if isinstance(result, Truth):
                active.remove(entry)
                yield i, _finish(requests[i], result)
            else:
                entry[2] = result
        if tick is not None:
            tick()  # lets the caller poll its own background work (tool runs) between our polls
        if not progressed:
            time.sleep(0.01)


def _advance(gen, outcome):
    """Send ``outcome`` to ``gen``; return the next started ``forked.Run`` or the final Truth."""
    try:
        request = gen.send(outcome)
    except StopIteration as stop:
        return stop.value
    except Exception as exc:  # the harness broke: say so, do not guess
        return Truth(UNKNOWN, f"ground-truth harness failed: {type(exc).__name__}: {exc}")
    try:
        return forked.Run(*request)
    except Exception as exc:
        gen.close()
        return Truth(UNKNOWN, f"could not start ranks: {type(exc).__name__}: {exc}")


def _finish(req: Request, truth: Truth) -> Truth:
    if truth.status == AGREE and req.race_possible:
        return Truth(RACE, "numbers agreed in this run, but a wait() was removed: timing decides")
    return truth


def _confirmed(kind: str, spec, world: int, timeout: float, ref_params=None, lib_path=None):
    """A run; a hang is confirmed by a second run with three times the timeout (a loaded
    machine must not turn a slow run into a "hang")."""
    outcome = yield (kind, spec, world, timeout, ref_params, lib_path)
    if outcome.timed_out:
        outcome = yield (kind, spec, world, 3 * timeout, ref_params, lib_path)
    return outcome


def _steps(r: Request, worlds, timeout):
    verdicts = []
    if r.kind == GALLERY:
        from groundtruth import runner as base

        for mode in (["forward", "grad"] if r.grad else ["forward"]):
            spec = base.JobSpec(r.path, mode=mode, timeout=timeout)
            ref = yield from _confirmed(GALLERY, spec, 1, timeout)
            if mode == "grad" and any(_NOTHING_TO_DIFFERENTIATE in e for e in ref.errors.values()):
                break   # no output depends on a floating input: the forward verdicts stand
            for w in worlds:
                par = yield from _confirmed(GALLERY, spec, w, timeout)
                verdicts.append(_classify(mode, w, ref, par, base._compare(base.Job(spec, w), ref, par)))
                if verdicts[-1].status == DIFFER:
                    return verdicts[-1]
    else:
        from groundtruth import realworld_runner as rw

        spec = rw.Spec(r.path, timeout=timeout)
        ref = yield from _confirmed(REALWORLD, spec, 1, timeout, None, r.lib_path)
        ref_params = ref.payloads[0].get("param_values", {}) if 0 in ref.payloads else {}
        for w in worlds:
            par = yield from _confirmed(REALWORLD, spec, w, timeout, ref_params, r.lib_path)
            verdicts.append(_classify("grad", w, ref, par, rw._compare(rw.Job(spec, w), ref, par)))
            if verdicts[-1].status == DIFFER:
                return verdicts[-1]
    for status in (INVALID, UNKNOWN):
        hit = [v for v in verdicts if v.status == status]
        if hit:
            return hit[0]
    return Truth(AGREE, "; ".join(v.reason for v in verdicts))


def _prepare_parent(kind: str) -> None:
    """Import once in the parent what every forked rank needs (real Megatron-core only for
    the real-world drivers: the gallery uses the test shim under the same name)."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised in the parent; cannot fork ranks")
    import torch.distributed.device_mesh  # noqa: F401
    import torch.distributed.tensor  # noqa: F401  (seconds of lazy imports, else paid by every rank)
    import torch.nn.functional  # noqa: F401

    import frontends.traced.entries  # noqa: F401  (the gallery runner's reading of inputs stated not trainable)

    del torch
    if kind == REALWORLD:
        import contextlib

        with contextlib.suppress(ImportError):
            import megatron.core.tensor_parallel  # noqa: F401


# Failures of the runner's machinery, not of the program: the answer is unknown.
_RUNNER_TROUBLE = ("runner gave up", "died during start-up", "did not start in time", "failed to start",
                   "worker exited without reporting", "worker process died")


def _failure(outcome) -> str | None:
    """One line naming how a run failed (``None`` if it did not): a rank's own exception, not the
    note of a rank stopped after a peer failed (under load every rank but the first to raise can be
    stopped before it reports its own, the same, exception; rank 0's note made such a run differ
    from one device raising that exception)."""
    from groundtruth import runner as base

    if outcome.timed_out:
        return "hangs (timeout)"
    if not outcome.errors:
        return None
    rank = base.own_failure_rank(outcome.errors)
    lines = [ln.strip() for ln in outcome.errors[rank].strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "error"


def _signature(failure: str) -> str:
    """An exception line without the numbers that name ranks, ports or world sizes."""
    return re.sub(r"\d+", "N", failure)[:200]


_NOTHING_TO_DIFFERENTIATE = "no output depends on the inputs through autograd"


def _classify(mode: str, world: int, ref, par, result) -> Truth:
    trouble = [e for e in list(ref.errors.values()) + list(par.errors.values())
               if any(m in e for m in _RUNNER_TROUBLE)]
    if trouble:
        return Truth(UNKNOWN, f"{mode}/{world}: ground-truth runner trouble: {trouble[0][:120]}")
    ref_fail, par_fail = _failure(ref), _failure(par)
    if ref_fail is not None:
        if par_fail is not None and _signature(ref_fail) == _signature(par_fail):
            return Truth(INVALID, f"raises on 1 and {world} ranks: {ref_fail[:160]}")
        return Truth(DIFFER, f"{mode}: 1 rank fails ({ref_fail[:120]}), {world} ranks "
                             f"{'fail otherwise: ' + par_fail[:120] if par_fail else 'run'}")
    if par_fail is not None:
        return Truth(DIFFER, f"{mode}: {world} ranks {par_fail[:160]}")
    if result.matches:
        return Truth(AGREE, f"{mode}: {world} ranks match")
    bad = [d for d in result.details if not d.matches]
    what = ", ".join(f"{d.name} (max|diff| {d.max_abs_diff:.3g})" for d in bad[:3])
    return Truth(DIFFER, f"{mode}: {world} ranks differ: {what}")
