"""The child process: run the user's file on one device, then on every rank, and hand back the IR.

Invoked by ``runner.py`` through ``frontends.sandbox.run_python`` as ``python
.../frontends/traced/child.py REQUEST.json`` (run as a script so that the static frontend's
package init, which the child never uses, is not imported: the child pays for torch only); it
answers with ``TracedProgram`` / ``TraceFailure`` values in ``frontends.wire``'s data-only format
on its result channel.  The user's output goes to this process's stdout/stderr, which the
parent keeps only the tail of.
"""
from __future__ import annotations

import json
import math
import os
import sys
import traceback
from dataclasses import replace


def _user_line(error: BaseException, path: str) -> int | None:
    target = os.path.realpath(path)
    line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.realpath(frame.filename) == target:
            line = frame.lineno
    if line is None and isinstance(error, SyntaxError) and error.filename \
            and os.path.realpath(error.filename) == target:
        line = error.lineno
    return line


def _raised_by_us(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    here = os.path.dirname(os.path.abspath(__file__))
    return bool(frames) and os.path.dirname(os.path.abspath(frames[-1].filename)) == here


def _at_reduced_sizes(run_request, reference, request: dict):
    """The program at smaller module-level sizes when the file's are large; None to keep the file's."""
    from verifier.traced_ir import TracedProgram

    from .run import run_once
    from .sizes import MAX_ELEMENTS, describe, reduced_sizes
    from .to_ir import to_program

    elements = sum(math.prod(int(d) for d in spec.shape) for spec in reference.recording.leaves)
    sizes = reduced_sizes(reference.constants, request["world"])
    if elements <= MAX_ELEMENTS or not sizes or run_request.shapes or run_request.harness:
        return None
    smaller_request = replace(run_request, sizes=sizes)
    try:
        smaller_reference = run_once(smaller_request, 1, 0, None)
        ranks = [run_once(smaller_request, request["world"], rank, smaller_reference)
                 for rank in range(request["world"])]
    except Exception:  # the code did not run at these sizes: keep the file's own
        return None
    program = to_program(smaller_reference, ranks, {**smaller_reference.layouts, **request.get("layouts", {})},
                         request["shown_as"])
    if not isinstance(program, TracedProgram):
        return None
    return replace(program, assumptions=program.assumptions + (describe(sizes, reference.constants),),
                   sizes=dict(sizes))


def _runs_only_in_parallel(run_request, request: dict, error: BaseException):
    """The code raised on one device: if it runs on a parallel rank, it refuses world size 1
    (Megatron's sequence parallelism does), so there is no single-device reference to run."""
    from .entries import EntryError
    from .harness_file import HarnessError
    from .harness_guard import HarnessRefused
    from .run import ModuleLevelError, run_once
    from .to_ir import TraceFailure

    if isinstance(error, (EntryError, ModuleLevelError, ImportError, HarnessError, HarnessRefused)):
        return None
    try:
        run_once(run_request, request["world"], 0, None)
    except Exception:
        return None
    return TraceFailure("cannot-run", f"the code does not run on one device ({error}), so there is no "
                                      f"single-device run to compare with")


# errors about shapes, indexes past the pieces a split made (fewer chunks than ranks), and
# torch.distributed's refusal of a message to the sending rank itself (ranks are exact)
_SHAPE_WORDS = ("shape", "size", "dimension", "index out of range",
                "rank should not be the same as the rank of the current process")


def _shape_error(error: BaseException) -> bool:
    """An error about shapes, which simulated ranks compute exactly (values read after a simulated
    collective are not real, so other errors of a rank are not evidence)."""
    text = str(error)
    return "INTERNAL ASSERT" not in text and any(word in text for word in _SHAPE_WORDS)


def _rank_raised(error, rank: int, world: int, reference=None, read_into_python: bool = False):
    """A rank raised where the single-device run did not.  Evidence (a violation at the line) unless the
    exception may come from the simulation: values read after a simulated collective are not real,
    and torch.distributed's process-group layer is stood in for by the fake group.  Shapes and ranks
    are exact on simulated ranks, so an error about them is evidence, unless the rank read values of
    a simulated collective into Python (``read_into_python``: split sizes exchanged by an all-to-all)."""
    from .to_ir import TraceFailure

    text = str(error)
    if "INTERNAL ASSERT" in text:   # torch's own assertion under the simulated group, not yours
        return TraceFailure("cannot-run", f"torch failed internally while simulating the ranks ({error})", error.line)
    if error.unreal is not None and (read_into_python or not _shape_error(error)):
        return TraceFailure("unsupported", f"rank {rank} of {world} raises where the single-device run does not "
                                           f"({error}), but {error.unreal}: not evidence of a bug", error.line)
    drawn = getattr(error, "drawn", None)
    if drawn:   # values and shapes of ours: the code may reject them rightly on the ranks
        return TraceFailure("unsupported", f"rank {rank} of {world} raises where the single-device run does not "
                                           f"({error}), on values the harness drew for {', '.join(drawn)}: not "
                                           f"evidence of a bug (give them with --input/--arg, or write a --harness)",
                            error.line)
    placed = _placement_origin(error)
    if placed is not None:
        line, words = placed
        return TraceFailure("violation", f"rank {rank} of {world} raises where the single-device run does not: "
                                         f"{error}; {words} {line}", line, rank_raised=True)
    origin = _shape_origin(error, reference) if _shape_error(error) else None
    if origin is not None:
        line, file, where = origin
        return TraceFailure("violation", f"rank {rank} of {world} raises where the single-device run does not: "
                                         f"{error} (raised at line {error.line}); the shape it could not take was made "
                                         f"at {where}", line, file=file, rank_raised=True)
    cut = _parameter_cut(error, reference) if _shape_error(error) else None
    if cut is not None and cut[0] != error.line:
        line, name = cut
        return TraceFailure("violation", f"rank {rank} of {world} raises where the single-device run does not: "
                                         f"{error} (raised at line {error.line}); it reads {name}, whose piece on "
                                         f"this rank is no equal block of one device's {name}: the piece was cut "
                                         f"where it was made, at line {line}", line, rank_raised=True)
    built = _layout_built_at(error, reference) if _shape_error(error) else None
    if built is not None and built[0] != error.line:
        line, words = built
        return TraceFailure("violation", f"rank {rank} of {world} raises where the single-device run does not: "
                                         f"{error}; {words}", error.line, file=error.file, repair_line=line,
                            rank_raised=True)
    return TraceFailure("violation", f"rank {rank} of {world} raises where the single-device run does not: {error}",
                        error.line, file=error.file, rank_raised=True)


def _parameter_cut(error, reference):
    """(line, name) of the parameter whose uneven piece the raising contraction read (``shape_origin.parameter_cut``)."""
    from .shape_origin import parameter_cut

    recording = getattr(error, "recording", None)
    if recording is None or reference is None:
        return None
    return parameter_cut(reference.recording, recording, recording.failed)


def _layout_built_at(error, reference):
    """(line, words) of the line that built the installed module whose gather or split made the shape the
    raising op could not take (``shape_origin.layout_built_at``)."""
    from .shape_origin import layout_built_at

    recording = getattr(error, "recording", None)
    if recording is None or reference is None:
        return None
    return layout_built_at(reference.recording, recording, recording.failed)


_PROPAGATION = "Sharding propagation failed"


def _placement_origin(error):
    """(line, words) for a rank raising in DTensor's sharding propagation: the op it was asked to run is
    right on one device, the placements of the parameters it reads are not; they were chosen at one line
    of the user's (the line that made their parallel style, or the parameter).  None unless exactly one."""
    recording = getattr(error, "recording", None)
    op = getattr(recording, "subclass_op", None)
    if op is None or _PROPAGATION not in str(error):
        return None
    made = {name: recording.made_lines[name] for name in _read_from(recording, op.args)
            if name in recording.made_lines}
    if len(set(made.values())) != 1:
        return None
    names = ", ".join(sorted(name.split("@local")[0] for name in made))
    raised = f" (raised at line {error.line})" if error.line is not None else ""
    return next(iter(made.values())), f"{op.kind}{raised} reads {names}, whose placements were chosen at line"


def _read_from(recording, names) -> set:
    """The values ``names`` view (a weight's transpose: the weight), through the run's recorded ops."""
    from .shape_origin import VIEWS

    producer = {result: op for op in recording.ops for result in op.results}
    seen, stack = set(), [name for name in names if name is not None]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        op = producer.get(name)
        if op is not None and name not in recording.made_lines and op.kind.startswith(VIEWS):
            stack.extend(op.args)
    return seen


def _shape_origin(error, reference):
    """(line, file, description) of the op whose shape the raising op could not take, when it is
    another line than the raise's (``shape_origin.where_raised``)."""
    from .shape_origin import located, where_raised

    recording = getattr(error, "recording", None)
    if recording is None or reference is None:
        return None
    op = where_raised(reference.recording, recording, recording.failed)
    return located(op, error.line)


def trace(request: dict):
    from .correspondence import split_no_grad
    from .entries import EntryError, parse_arg
    from .harness_file import HarnessError
    from .harness_guard import HarnessRefused
    from .run import ArgumentsFailed, ModuleLevelError, RunRequest, UserCodeError, needs_leaf_inputs, run_once
    from .to_ir import TraceFailure, to_program
    from . import collectives

    collectives.install_patches()
    path = request["path"]
    layouts, no_grad = split_no_grad(dict(request.get("layouts", {})))
    request = {**request, "layouts": layouts}
    run_request = RunRequest(path, request["shown_as"], request.get("entry"),
                             {k: tuple(v) for k, v in request.get("shapes", {}).items()}, no_grad=no_grad,
                             paths=tuple(request.get("paths", ())),
                             args=dict(parse_arg(text) for text in request.get("args", ())),
                             harness=request.get("harness"), layouts=layouts)
    try:
        try:
            reference = run_once(run_request, 1, 0, None)
        except (UserCodeError, Exception) as error:
            if not needs_leaf_inputs(error):
                refused = _runs_only_in_parallel(run_request, request, error)
                if refused is not None:
                    return refused
                raise
            run_request = replace(run_request, inputs_as_made=True)   # the code takes its inputs as leaves
            reference = run_once(run_request, 1, 0, None)
        smaller = _at_reduced_sizes(run_request, reference, request)
        if smaller is not None:
            return smaller
        ranks = []
        replays = _replays(request)
        for rank in range(request["world"]):
            try:
                ranks.append(_run_rank(run_request, request["world"], rank, reference, replays))
            except UserCodeError as error:
                recording = error.recording
                return _read_collective(_rank_raised(error, rank, request["world"], reference,
                                                     recording is not None and recording.read_into_python),
                                        recording is not None and recording.read_collective)
    except HarnessError as error:   # the harness (not the user's code) failed: what it raised, its line
        return TraceFailure("harness-error", str(error), error.line)
    except HarnessRefused as error:   # the harness did more than build arguments
        return TraceFailure("harness-refused", str(error), None)
    except ModuleLevelError as error:
        return TraceFailure("cannot-run", f"its module-level code raised when imported on CPU ({error}): a launch "
                                          f"script or code that needs a real cluster",
                            _user_line(error.__cause__ or error, path))
    except UserCodeError as error:
        if "INTERNAL ASSERT FAILED" in str(error):  # torch's own assertion under the simulated group, not yours
            return TraceFailure("cannot-run", f"torch failed internally while simulating the ranks ({error})",
                                error.line)
        return TraceFailure("input-error", str(error), error.line, building=error.tool_arguments)
    except EntryError as error:
        return TraceFailure("input-error", str(error), None, building=True)
    except ArgumentsFailed as error:   # the user's code raised on the arguments this tool chose
        return TraceFailure("input-error", str(error), _user_line(error.__cause__ or error, path), building=True)
    except ModuleNotFoundError as error:
        if _user_line(error, path) is not None:
            return TraceFailure("cannot-run", f"{type(error).__name__}: {error}", _user_line(error, path))
        raise
    except Exception as error:
        line = _user_line(error, path)
        if line is None or _raised_by_us(error):
            raise
        if "INTERNAL ASSERT FAILED" in str(error):
            return TraceFailure("cannot-run", f"torch failed internally while simulating the ranks "
                                              f"({type(error).__name__})", line)
        return TraceFailure("input-error", f"{type(error).__name__}: {error}", line)
    return _read_collective(to_program(reference, ranks, {**reference.layouts, **request.get("layouts", {})},
                                       request["shown_as"]),
                            any(run.recording.read_collective for run in ranks))


def _replays(request: dict) -> list | None:
    """Each rank's real collective values (``replay.py``), when the request gives them for its world."""
    from .message import unpack
    from .replay import Replay

    given = (request.get("replay") or {}).get(str(request["world"]))   # world -> the real ranks' log
    if not given:
        return None
    with open(given, "rb") as handle:
        meta, arrays = unpack(handle.read())
    if int(meta.get("world", 0)) != int(request["world"]):
        return None
    return [Replay.from_message(rank_meta, {name.split(":", 1)[1]: value for name, value in arrays.items()
                                            if name.split(":", 1)[0] == str(rank)})
            for rank, rank_meta in enumerate(meta["ranks"])]


def _run_rank(run_request, world: int, rank: int, reference, replays):
    """One simulated rank, with the real collective values of ``replays`` when there are some."""
    from . import replay
    from .run import run_once

    given = replays[rank] if replays is not None and rank < len(replays) else None
    replay.activate(given)
    try:
        result = run_once(run_request, world, rank, reference)
    finally:
        replay.activate(None)
    if given is not None and given.given:
        result.assumptions.append(given.assumption(rank, world))
    return result


def _read_collective(result, read: bool):
    """An unsupported failure whose rank read simulated collective values says so (the runner then asks
    real ranks for those values, once)."""
    from .to_ir import TraceFailure

    if read and isinstance(result, TraceFailure) and result.kind == "unsupported":
        return replace(result, reads_collective=True)
    return result


def discover_entries(request: dict):
    """The file's distributed entries (``discover.py``), found by importing it as a run would."""
    from .discover import discover, follows_conventions
    from .entries import EntryError, find_entry
    from .found import Discovery
    from .run import ModuleLevelError, import_fresh, init_group, is_launch_script, teardown
    from .to_ir import TraceFailure

    path = request["path"]
    if is_launch_script(path):   # importing it would run it: the launch-script rules apply
        return Discovery((), conventions=True)
    init_group(1, 0)
    try:
        try:
            module = import_fresh(path, tuple(request.get("paths", ())))
        except ImportError:
            raise
        except Exception as error:
            raise ModuleLevelError(f"{type(error).__name__}: {error}") from error
        try:
            default = find_entry(module, None).name
        except EntryError:
            default = None
        return Discovery(tuple(discover(module)), follows_conventions(module), default)
    except ModuleLevelError as error:
        return TraceFailure("cannot-run", f"its module-level code raised when imported on CPU ({error})",
                            _user_line(error.__cause__ or error, path))
    except ImportError as error:
        return TraceFailure("cannot-run", f"{type(error).__name__}: {error}", _user_line(error, path))
    finally:
        teardown()


def _guarded_trace(request: dict):
    try:
        return trace(request)
    except Exception as error:  # a bug of ours: the parent reports it as an internal error
        from .to_ir import TraceFailure

        return TraceFailure("internal", "".join(traceback.format_exception(error))[-4000:], None)


def main(argv: list[str]) -> int:
    """Answers through the private result channel (``frontends.sandbox.result_channel``, taken
    before any user code runs): the run on ``world`` ranks first, then the run on every further
    world size asked for, one ``frontends.wire`` message each, so a time limit reached during
    those still leaves the main result."""
    from frontends.sandbox import enter_child, result_channel
    from verifier.traced_ir import TracedProgram

    channel = result_channel()
    (request_path,) = argv
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    enter_child(memory_bytes=None)   # the parent set the memory limit; secrets, loopback, network
    from frontends.traced.location import locate

    paths = tuple(request.get("paths", ()))
    # a package's file is imported from its import root, never from its own directory (where a sibling
    # such as megatron's tensor_parallel/random.py would shadow the standard library's module)
    sys.path[0:0] = [locate(request["path"], paths).root, *paths]
    if request.get("mode") == "discover":
        try:
            _write(channel, discover_entries(request))
        except Exception as error:  # a bug of ours: the parent reports it as an internal error
            from .to_ir import TraceFailure

            _write(channel, TraceFailure("internal", "".join(traceback.format_exception(error))[-4000:], None))
        return 0
    result = _guarded_trace(request)
    _write(channel, result)
    if isinstance(result, TracedProgram):
        for world in request.get("also_worlds", []):
            _write(channel, _guarded_trace({**request, "world": world}))
    return 0


def _write(channel, result) -> None:
    from frontends import wire

    if channel is None:
        return
    try:
        data = wire.encode(result)
    except wire.WireError as error:  # a value of ours the format does not carry: a bug of ours
        from .to_ir import TraceFailure

        data = wire.encode(TraceFailure("internal", f"the recording cannot be sent back: {error}", None))
    channel.write(data)


def _bootstrap() -> None:
    """Make ``frontends.traced`` importable without running ``frontends/__init__.py``."""
    import types
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path[0:1] = [str(root)]   # replace this script's own directory
    if "frontends" not in sys.modules:
        package = types.ModuleType("frontends")
        package.__path__ = [str(root / "frontends")]
        sys.modules["frontends"] = package


if __name__ == "__main__":
    _bootstrap()
    from frontends.traced.child import main as traced_main

    code = traced_main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (seconds with torch loaded); answers are written
