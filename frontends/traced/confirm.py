"""Confirm a counterexample with torch: run the user's code for real with its values and compare.

``confirm_on_ranks(program, finding, ...)`` is the ``Confirm`` the traced check calls before it
reports a violation (``verifier/confirmation.py``).  It runs the user's file once on a gloo
group of one process and once on ``program.world`` gloo ranks (CPU processes over 127.0.0.1,
``confirm_child.py``, started through ``frontends.sandbox.run_python``), every named leaf
given the counterexample's value: entry inputs and the single-device parameters as they are,
each rank's pieces of parameters and cotangents cut by the rank's own layout ops from the
recording, random draws by name.  Then the same outputs and gradients the proof compared
(``program.comparisons``, their regions) are compared here with torch's numbers, in NumPy.

A finding on an output is confirmed by the forward pass alone: the entry's inputs are given as
tensors that do not require gradients, no backward of the outputs is run, and only outputs are
compared.  Plain ``torch.distributed`` collectives have no autograd formula, and gloo writing a
trainable tensor on its own thread races with autograd (an ``all_gather_into_tensor`` of a
trainable input raises "A view was created in no_grad mode" in some runs and not in others), so a
forward verdict taken with trainable inputs would depend on thread timing.  Grad mode itself stays
on: code that runs its own backward (a training step) runs as written.

The layout the verifier assumed for each sharded parameter is checked against the values the
code itself builds (before the counterexample's are put in): a rank whose own parameter is a
different piece of the single-device parameter than the one assumed makes the run no evidence.
No torch in this process: the children import it.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

import numpy as np

from verifier.backends import NumpyBackend
from verifier.confirmation import AGREES, NOT_RUN, REPRODUCED, Confirmation, Finding
from verifier.counterexample import plain
from verifier.traced_ir import Comparison, TracedProgram
from verifier.traced_run import RunError, new_cache, run

from .message import MessageError, pack, unpack

CHILD = Path(__file__).with_name("confirm_child.py")
SEED = 0                     # the tracing runs' seed (RunRequest.seed): parameters are built alike
# (rtol, atol relative to the compared value's magnitude) per dtype torch computed in
WALL_SLACK = 8.0   # the wall-clock bound of a confirmation, in multiples of its CPU budget
TOLERANCE = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-3)}


def confirm_on_ranks(program: TracedProgram, finding: Finding, *, path: str, shown_as: str | None = None,
                     entry: str | None = None, shapes: dict | None = None, timeout: float = 90.0,
                     memory_bytes: int | None = None, paths: tuple[str, ...] = (),
                     args: tuple[str, ...] = (), harness: str | None = None,
                     every_value: bool = False) -> Confirmation:
    """``every_value``: forward and gradients are run and compared whatever the finding is on (a fix's
    check); otherwise a finding on an output is run and compared forward only (see above)."""
    started = time.perf_counter()
    world = program.world
    leaves = {name: np.asarray(value) for name, value in finding.leaves.items()}
    try:
        runs = [({"world": 1, "rank": 0}, _reference_leaves(program, leaves))]
        runs += [({"world": world, "rank": r}, _rank_leaves(program, leaves, r)) for r in range(world)]
    except (RunError, KeyError, ValueError) as error:
        return Confirmation(NOT_RUN, f"the ranks' pieces of the counterexample cannot be cut ({error})", world,
                            seconds=time.perf_counter() - started)
    forward_only = not every_value and not finding.late_async and _on_an_output(program, finding)
    confirm = functools.partial(_confirm, program, finding, leaves, runs, forward_only, path=path, shown_as=shown_as,
                                entry=entry, shapes=shapes, timeout=timeout, memory_bytes=memory_bytes, paths=paths,
                                args=args, harness=harness)
    confirmation = confirm(started, False)
    if finding.late_async:
        return dataclasses.replace(confirmation, detail=f"{confirmation.detail}, each async op's result written at "
                                                        f"its wait() (the latest torch allows)")
    if confirmation.outcome != AGREES or not _float32_may_hide(finding):
        return confirmation
    # torch agrees within float32's tolerance while the model's difference is real numbers apart (a
    # LayerNorm eps that differs per rank): the same runs again with torch's default dtype float64
    in_float64 = confirm(time.perf_counter(), True)
    if in_float64.outcome != REPRODUCED:
        return confirmation
    return dataclasses.replace(in_float64, detail=f"{in_float64.detail}, with torch's default dtype float64 (in "
                                                  f"float32 the difference is within rounding)",
                               seconds=confirmation.seconds + in_float64.seconds)


def _float32_may_hide(finding: Finding) -> bool:
    """The finding's two values differ by less than float32's tolerance (and more than float64's), by the
    rule torch's own values are compared with."""
    try:
        want = np.asarray(finding.model_reference, dtype=np.float64).reshape(-1)
        got = np.asarray(finding.model_rank, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        return False
    if want.shape != got.shape:
        return False
    return not _apart(want, got, "float32").any() and bool(_apart(want, got, "float64").any())


def _confirm(program: TracedProgram, finding: Finding, leaves, runs: list, forward_only: bool, started: float,
             float64: bool, *, path: str, shown_as: str | None, entry: str | None, shapes: dict | None,
             timeout: float, memory_bytes: int | None, paths: tuple[str, ...], args: tuple[str, ...],
             harness: str | None) -> Confirmation:
    common = {"forward_only": forward_only, "float64": float64, "sizes": dict(program.sizes),
              "inputs_as_made": program.inputs_as_made, "late_async": finding.late_async}
    ran = _run_real(common, runs, started, path=path, shown_as=shown_as, entry=entry, shapes=shapes, timeout=timeout,
                    memory_bytes=memory_bytes, paths=paths, args=args, harness=harness)
    if isinstance(ran, Confirmation):
        return ran
    answers, per_run, seconds = ran
    return _judge(program, finding, leaves, answers, per_run, seconds, forward_only)


def confirm_raise(world: int, *, path: str, shown_as: str | None = None, entry: str | None = None,
                  shapes: dict | None = None, timeout: float = 90.0, memory_bytes: int | None = None,
                  paths: tuple[str, ...] = (), args: tuple[str, ...] = (), harness: str | None = None,
                  shape_of: str | None = None) -> Confirmation:
    """A simulated rank raised where the single-device run did not, or returned ``shape_of`` (an output or
    gradient) in another shape: the user's code run for real, built and given its inputs as the tracing
    runs were (the same seed), forward and backward (every output's cotangent ones), on one device and on
    ``world`` gloo ranks.  REPRODUCED: a real rank raises too, the real ranks block each other where one
    device finishes (a hang is the failure there), or a real rank's ``shape_of`` has another shape than one
    device's; AGREES: every real rank finishes (with ``shape_of`` in the one-device shape); NOT_RUN: the
    real runs say neither (one device raised as well, or they did not finish)."""
    started = time.perf_counter()
    runs = [({"world": 1, "rank": 0}, {})] + [({"world": world, "rank": r}, {}) for r in range(world)]
    # an output's shape is confirmed by the forward pass alone, as a value on an output is (see above)
    forward_only = shape_of is not None and not shape_of.startswith("gradient")
    ran = _run_real({"forward_only": forward_only, "float64": False, "sizes": {}, "cotangents": "ones"}, runs, started,
                    path=path, shown_as=shown_as, entry=entry, shapes=shapes, timeout=timeout,
                    memory_bytes=memory_bytes, paths=paths, args=args, harness=harness)
    if isinstance(ran, Confirmation):
        return ran
    answers, per_run, seconds = ran
    reference, ranks = answers[0], answers[1:]
    if reference.get("status") != "ok":
        return Confirmation(NOT_RUN, f"torch on one device did not finish either: {reference.get('error')}", world,
                            seconds=seconds)
    for rank, answer in enumerate(ranks):
        if answer.get("status") == "raised":
            where = f" at line {answer['line']}" if answer.get("line") else ""
            return Confirmation(REPRODUCED, f"reproduced by torch on {world} gloo ranks: rank {rank} raises{where} "
                                            f"({answer.get('error')})", world, rank=rank, seconds=seconds)
    unfinished = [(rank, answer) for rank, answer in enumerate(ranks) if answer.get("status") != "ok"]
    hung = _hung(unfinished, world, seconds)
    if hung is not None:
        return hung
    if unfinished:
        rank, answer = unfinished[0]
        return Confirmation(NOT_RUN, f"rank {rank} of {world} did not finish on gloo ({answer.get('error')})", world,
                            seconds=seconds)
    if shape_of is not None:
        return _shape_on_ranks(shape_of, per_run, world, seconds)
    return Confirmation(AGREES, f"on {world} real gloo ranks with the same inputs no rank raises", world,
                        seconds=seconds)


def _shape_on_ranks(label: str, per_run: list[dict], world: int, seconds: float) -> Confirmation:
    """What real ranks say of a simulated rank's ``label`` in another shape than one device's."""
    if label not in per_run[0] or any(label not in values for values in per_run[1:]):
        return Confirmation(NOT_RUN, f"the real runs did not produce {label}", world, seconds=seconds)
    whole = tuple(np.shape(per_run[0][label]))
    for rank, values in enumerate(per_run[1:]):
        if tuple(np.shape(values[label])) != whole:
            return Confirmation(REPRODUCED, f"reproduced by torch on {world} gloo ranks: {label} has shape "
                                            f"{tuple(np.shape(values[label]))} on rank {rank}, {whole} on one device",
                                world, label, rank, seconds=seconds)
    return Confirmation(AGREES, f"on {world} real gloo ranks with the same inputs {label} has the one-device shape "
                                f"{whole} on every rank", world, seconds=seconds)


def _hung(unfinished: list[tuple[int, dict]], world: int, seconds: float) -> Confirmation | None:
    """Real ranks that block each other where one device finished (the child's hang rule): torch fails too."""
    if not unfinished or not all(answer.get("status") == "hung" for _, answer in unfinished):
        return None
    blocked = ", ".join(str(rank) for rank, _ in unfinished)
    return Confirmation(REPRODUCED, f"torch on {world} gloo ranks fails too, by hanging instead: rank(s) {blocked} "
                                    f"block each other ({unfinished[0][1].get('error')}) where one device "
                                    f"finishes", world, rank=unfinished[0][0], seconds=seconds)


def _run_real(common: dict, runs: list, started: float, *, path: str, shown_as: str | None, entry: str | None,
              shapes: dict | None, timeout: float, memory_bytes: int | None, paths: tuple[str, ...],
              args: tuple[str, ...], harness: str | None):
    """``runs`` (each run's meta and its leaves' values) made by the confirmation child: (answers, each run's
    values, seconds), or a NOT_RUN ``Confirmation`` saying why there are none."""
    from frontends.sandbox import DEFAULT_MEMORY_BYTES, run_python

    world = len(runs) - 1
    common = {**common, "path": str(Path(path).resolve()), "shown_as": shown_as or str(path), "entry": entry,
              "shapes": {k: list(v) for k, v in (shapes or {}).items()}, "seed": SEED,
              "gloo_timeout": max(5.0, timeout * WALL_SLACK * 0.5), "paths": [str(p) for p in paths],
              "args": list(args), "harness": harness}
    arrays = {f"{position}:{name}": value for position, (_, values) in enumerate(runs) for name, value in values.items()}
    # ``timeout`` is the runs' CPU budget, the same on a busy machine as on an idle one; the wall clock
    # only bounds a hang (or a machine so busy that even WALL_SLACK times the budget is not enough)
    request = pack({"common": common, "runs": [meta for meta, _ in runs], "timeout": max(5.0, timeout - 5.0),
                    "wall": max(5.0, timeout * WALL_SLACK - 5.0)}, arrays)
    result = run_python([str(CHILD)], timeout=timeout * WALL_SLACK, input=request, cwd=str(Path(path).resolve().parent),
                        memory_bytes=memory_bytes or DEFAULT_MEMORY_BYTES,
                        extra_env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - started
    try:
        meta, values = unpack(result.result)
    except MessageError:
        if result.timed_out:
            reason = f"the runs took longer than {timeout * WALL_SLACK:g} s of wall-clock time (the outer bound)"
        else:
            tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            reason = f"the runs ended with code {result.returncode} and no answer: {tail[0]}"
        return Confirmation(NOT_RUN, reason, world, seconds=seconds)
    answers = meta.get("runs")
    if not isinstance(answers, list) or len(answers) != world + 1 or not all(isinstance(a, dict) for a in answers):
        return Confirmation(NOT_RUN, "the runs' answer is malformed", world, seconds=seconds)
    per_run = [{name.split(":", 1)[1]: value for name, value in values.items() if name.split(":", 1)[0] == str(i)}
               for i in range(world + 1)]
    return answers, per_run, seconds


def _on_an_output(program: TracedProgram, finding: Finding) -> bool:
    return any(c.label == finding.label and c.kind != "gradient" for c in program.comparisons)


# --- the leaves of each run ------------------------------------------------------------------------

def _reference_leaves(program: TracedProgram, leaves: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: value for name, value in leaves.items() if "@" not in name}


def _rank_leaves(program: TracedProgram, leaves: dict[str, np.ndarray], rank: int) -> dict[str, np.ndarray]:
    """What rank ``rank`` holds: the whole leaves, its own random draws, and its pieces (``X@local``)
    cut by the layout ops the recording starts with."""
    own = {name: value for name, value in leaves.items() if "@" not in name}
    suffix = f"@rank{rank}"
    own.update({name[:-len(suffix)]: value for name, value in leaves.items() if name.endswith(suffix)})
    prefix = _layout_ops(program, rank)
    if prefix:
        (env,) = run((prefix,), leaves, NumpyBackend(), new_cache())
        own.update({name: np.asarray(env[name]) for op in prefix for name in op.results if "#" not in name})
    return own


def _layout_ops(program: TracedProgram, rank: int) -> tuple:
    ops = []
    for op in program.ranks[rank]:
        if op.attr("layout_source") is None:
            break
        ops.append(op)
    return tuple(ops)


def _layout_contradicted(program: TracedProgram, leaves: dict[str, np.ndarray], reference_own: dict,
                         rank: int, owns: list[dict]) -> str | None:
    """A parameter the code builds, on this rank, as another piece of the single-device parameter
    than the verifier assumed (its values are there, elsewhere): the sentence saying so.  A piece
    every rank builds alike (each drew its own piece from the same seed) shows no layout at all."""
    rank_own = owns[rank]
    prefix = _layout_ops(program, rank)
    if not prefix or not reference_own:
        return None
    try:
        (env,) = run((prefix,), {**leaves, **reference_own}, NumpyBackend(), new_cache())
    except RunError:
        return None
    for op in prefix:
        for name in op.results:
            actual = rank_own.get(name)
            whole = reference_own.get(name.split("@")[0])
            if actual is None or whole is None or "#" in name:
                continue
            assumed = np.asarray(env[name])
            if assumed.shape != actual.shape or np.array_equal(assumed, actual):
                continue
            if all(name in own and np.array_equal(own[name], actual) for own in owns):
                continue
            if actual.size and np.ptp(actual) > 0 and np.isin(actual, whole).all():
                return (f"parameter {name.split('@')[0]}: the piece your code builds on rank {rank} is not the "
                        f"one the verifier assumed ({op.kind} from {op.attr('layout_source')}); its values sit "
                        f"elsewhere in the single-device parameter")
    return None


# --- judging -----------------------------------------------------------------------------------------

def _judge(program: TracedProgram, finding: Finding, leaves, answers: list[dict], per_run: list[dict],
           seconds: float, forward_only: bool = False) -> Confirmation:
    world = program.world
    reference, ranks = answers[0], answers[1:]
    if reference.get("status") != "ok":
        where = f" (line {reference['line']})" if reference.get("line") else ""
        return Confirmation(NOT_RUN, f"torch on one device did not finish with the counterexample's values: "
                                     f"{reference.get('error')}{where}", world, seconds=seconds)
    reference_own = {name[4:]: value for name, value in per_run[0].items() if name.startswith("own:")}
    owns = [{name[4:]: value for name, value in values.items() if name.startswith("own:")} for values in per_run[1:]]
    for rank in range(world):
        if ranks[rank].get("status") != "ok":
            continue
        contradicted = _layout_contradicted(program, leaves, reference_own, rank, owns)
        if contradicted is not None:
            return Confirmation(NOT_RUN, contradicted, world, seconds=seconds)
    broken = [(rank, answer) for rank, answer in enumerate(ranks) if answer.get("status") in ("crashed", "harness")]
    if broken:   # not the user's code raising: no evidence either way
        rank, answer = broken[0]
        return Confirmation(NOT_RUN, f"rank {rank} of {world}: {answer.get('error')}", world, seconds=seconds)
    failed = [(rank, answer) for rank, answer in enumerate(ranks) if answer.get("status") == "raised"]
    if failed:
        rank, answer = failed[0]
        where = f" at line {answer['line']}" if answer.get("line") else ""
        return Confirmation(REPRODUCED, f"reproduced by torch on {world} gloo ranks: rank {rank} raises{where} where "
                                        f"one device does not ({answer.get('error')})", world, rank=rank,
                            seconds=seconds)
    unfinished = [(rank, answer) for rank, answer in enumerate(ranks) if answer.get("status") != "ok"]
    hung = _hung(unfinished, world, seconds)
    if hung is not None:
        return hung
    if unfinished:
        rank, answer = unfinished[0]
        return Confirmation(NOT_RUN, f"rank {rank} of {world} did not finish ({answer.get('error')})", world,
                            seconds=seconds)
    compared_now = [c for c in program.comparisons if not (forward_only and c.kind == "gradient")]
    ordered = sorted(compared_now, key=lambda c: c.label != finding.label)
    compared = 0
    for comparison in ordered:
        whole = _reference_value(program, comparison, per_run[0])
        if whole is None:
            continue
        differing = None
        for rank, region in enumerate(comparison.regions):
            if comparison.per_rank[rank] is None:
                continue
            want = _cut(whole, region)
            got = _rank_value(comparison, per_run[rank + 1], whole, region, want)
            compared += 1
            index = _first_difference(want, got, finding.index if comparison.label == finding.label
                                      and rank == finding.rank else ())
            if index is not None and differing is None:
                differing = (rank, index, want, got)
        if differing is not None:
            rank, index, want, got = differing
            shown = {f"rank {r}": {comparison.label: _rank_value(comparison, per_run[r + 1], whole, region,
                                                                   _cut(whole, region))}
                     for r, region in enumerate(comparison.regions) if comparison.per_rank[r] is not None}
            return Confirmation(REPRODUCED, f"reproduced by torch: your code run on one device and on {world} gloo "
                                            f"ranks with these values", world, comparison.label, rank, index,
                                _element(want, index), _element(got, index), shown, seconds)
    if not compared:
        return Confirmation(NOT_RUN, "the real runs produced none of the compared outputs and gradients", world,
                            seconds=seconds)
    return Confirmation(AGREES, f"torch computes the same on one device and on {world} gloo ranks with these values "
                                f"({compared} compared value(s) of your code agree)", world, seconds=seconds)


def _reference_value(program: TracedProgram, comparison: Comparison, values: dict) -> np.ndarray | None:
    value = values.get(comparison.label)
    if value is not None:
        return _in_comparison_order(program, comparison, value)
    if comparison.kind == "gradient":   # never computed: zeros, as the recording takes it
        leaf = comparison.label.split("gradient of ", 1)[-1].removesuffix(" after the script")
        spec = next((s for s in program.inputs if s.name == leaf), None)
        if spec is not None:
            return np.zeros(tuple(int(d) for d in spec.shape))
    return None


def _in_comparison_order(program: TracedProgram, comparison: Comparison, value: np.ndarray) -> np.ndarray:
    """A gradient of strided pieces is compared reordered so that each rank's piece is one block
    (``comparison_order`` ops after the reference's own): the same reordering of torch's value."""
    chain, wanted = [], comparison.reference
    by_result = {op.results[0]: op for op in program.reference if op.attr("comparison_order") and op.results}
    pending = [wanted]
    while pending:
        op = by_result.get(pending.pop())
        if op is None or op in chain:
            continue
        chain.append(op)
        pending.extend(op.args)
    if not chain:
        return value
    chain.sort(key=program.reference.index)
    sources = {arg for op in chain for arg in op.args} - {name for op in chain for name in op.results}
    (env,) = run((tuple(chain),), {name: value for name in sources}, NumpyBackend(), new_cache())
    return np.asarray(env[wanted])


def _cut(value: np.ndarray, region) -> np.ndarray:
    if region is None or len(region) != value.ndim:
        return value
    return value[tuple(slice(int(a), int(b)) for a, b in region)]


def _rank_value(comparison: Comparison, values: dict, whole: np.ndarray, region, want: np.ndarray) -> np.ndarray:
    got = values.get(comparison.label)
    if got is None:
        return np.zeros(want.shape) if comparison.kind == "gradient" else np.full(want.shape, np.nan)
    if got.shape == whole.shape and got.shape != want.shape:   # a rank's whole gradient, compared on its block
        return _cut(got, region)
    return got


def _first_difference(want: np.ndarray, got: np.ndarray, preferred: tuple) -> tuple | None:
    """None when torch's two values agree within float tolerance, else an index where they differ
    (``preferred``, the model's, when they differ there)."""
    if want.shape != got.shape:
        return ()
    if want.dtype.kind == "b" or got.dtype.kind == "b" or want.dtype.kind in "iu" and got.dtype.kind in "iu":
        differs = want != got
    else:
        differs = _apart(want.astype(np.float64), got.astype(np.float64), np.result_type(want.dtype, got.dtype).name)
    if not differs.any():
        return None
    if preferred and len(preferred) == differs.ndim and differs[preferred]:
        return tuple(preferred)
    return tuple(int(i) for i in np.argwhere(differs)[0])


def _apart(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """Where ``a`` and ``b`` differ by more than ``dtype``'s rounding (atol relative to their magnitude)."""
    rtol, atol = TOLERANCE.get(dtype, TOLERANCE["float32"])
    finite = np.concatenate([np.abs(a[np.isfinite(a)]).ravel(), np.abs(b[np.isfinite(b)]).ravel()])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return ~np.isclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True)


def _element(value: np.ndarray, index: tuple) -> Any:
    if index and value.ndim == len(index):
        return plain(value[index])
    return plain(value)
