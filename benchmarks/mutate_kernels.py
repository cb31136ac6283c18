"""Mutation campaign over the bundled TileLang kernels: no wrong kernel may be ``verified``.

    python benchmarks/mutate_kernels.py [--limit N] [--kernel FILE.py] [--json out.json]

Each kernel of ``examples/kernels/`` written in TileLang's styles is mutated line by line
with the bugs people make in tiled kernels: swapped block indices, tile-size mix-ups,
off-by-one bounds, floor-division grids, a dropped accumulator clear, a plain store where
split-K needs an atomic add, a wrong causal-mask bound, a value truncated through int32, a
value rounded to float16/bfloat16 before its conversion to an integer, an integer output dtype,
a K loop capped by (or run a) constant number of tiles.  Prints how
many violations name the mutated line (as their line, or among the lines the wrong value
came through) and how many findings are worded as latent (sizes the file does not build).  Every mutant is

* checked by the lifter (all mutants in one elaboration child: ``run_batch``), and
* run concretely for the ground truth, in a second child (``--ground-truth`` below): the
  kernel TileLang builds at the file's *real* sizes and tiles is lifted and interpreted on
  random inputs and compared with the file's torch reference run by torch on CPU.

Prints per-mutant verdicts, the confusion table and the number of wrong mutants the tool
calls ``verified`` (goal: 0).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNELS = ["eager_gemm.py", "eager_splitk.py", "eager_elementwise.py", "factory_row_max.py", "multi_kernel.py",
           "causal_tril.py", "factory_splitk_relu.py",
           "eager_gemm_bt.py", "causal_row_sum.py", "profiler_scaled_gemm.py", "eager_rms_rows.py", "dynamic_axpy.py",
           "flash_attention_causal.py", "two_pass_softmax.py", "autotuned_gemm.py", "banded_parity_mask.py",
           "conv2d_im2col.py", "inline_checked_row_shift.py", "module_sizes_rows.py",
           "block_sparse_gemm.py", "chunk_sums.py", "split_masked_row_sum.py",
           "gcd_tile_rows.py", "row_bias_view.py", "persistent_while_scale.py",
           "counted_k_tiles_gemm.py", "typed_elementwise.py", "capped_k_gemm.py", "quantize_scale.py", "gather_rows.py",
           "paged_gather.py"]


PER_FILE_SECONDS = 60.0  # wall time for one mutant's real-size ground-truth run
TRUTH_SECONDS = 3600.0  # wall time for all of them


@dataclass(frozen=True)
class Mutant:
    kernel: str
    operator: str
    line: int
    source: str


def _swap(text: str, a: str, b: str) -> str:
    return re.sub(rf"\b({a}|{b})\b", lambda m: b if m.group(1) == a else a, text)


def _wrap_argument(line: str, call: str, wrapper: str) -> str | None:
    """``line`` with the last argument of the first ``call`` wrapped in ``wrapper ... )``."""
    start = line.find(call)
    if start < 0:
        return None
    begin, depth = start + len(call), 1
    for end in range(begin, len(line)):
        depth += {"(": 1, ")": -1}.get(line[end], 0)
        if depth == 0:
            return line[:begin] + wrapper + line[begin:end] + ")" + line[end:]
    return None


def _line_mutations(line: str, tiles: tuple[str, ...] = (), blocks: tuple[str, str] = ("bx", "by")
                    ) -> list[tuple[str, str]]:
    """(operator, mutated line) for one source line of a kernel body."""
    out: list[tuple[str, str]] = []
    code = line.split("#")[0]
    indexing = ("T.copy(" in code or "[" in code) and "T.Kernel" not in code and "alloc" not in code
    if indexing and all(re.search(rf"\b{b}\b", code) for b in blocks):
        out.append(("swapped block indices", _swap(line, *blocks)))
    for a, b in (("block_K", "block_N"), ("block_K", "block_M"), ("block_M", "block_N")):
        if indexing and re.search(rf"\b{a}\b", code):
            out.append(("tile-size mix-up", re.sub(rf"\b{a}\b", b, line, count=1)))
    value_code = re.sub(r"\[[^\]]*\]", "", code)  # outside indices: a size used as a value
    if tiles and "=" in value_code and re.search(r"/ [MN]\b", value_code):
        out.append(("tile size for a size", re.sub(r"/ ([MN])\b", f"/ {tiles[0]}", line, count=1)))
    if "T.Kernel(" in code and "T.ceildiv(" in code:
        out.append(("floor grid", re.sub(r"T\.ceildiv\(([^,]+), ([^)]+)\)", r"\1 // \2", line, count=1)))
    if re.search(r"for \w+ in T\.(Pipelined|serial)\(T\.ceildiv\(", code):
        out.append(("off-by-one loop bound", re.sub(r"T\.ceildiv\(([^)]*)\)", r"T.ceildiv(\1) - 1", line, count=1)))
    if re.search(r"for \w+ in T\.serial\(\w+\)", code):
        out.append(("off-by-one loop bound", re.sub(r"T\.serial\((\w+)\)", r"T.serial(\1 - 1)", line, count=1)))
    if "!= 0" in code:
        out.append(("inverted mask test", line.replace("!= 0", "== 0", 1)))
    if re.search(r"\b\w+ < [MN]\b", code):
        out.append(("off-by-one guard", re.sub(r"\b(\w+) < ([MN])\b", r"\1 <= \2", line, count=1)))
    if re.search(r"\+ i\b", code) and indexing:
        out.append(("off-by-one index", re.sub(r"\+ i\b", "+ i + 1", line, count=1)))
    if "T.copy(" in code and re.search(r"\b[bk]\w* \* block_\w+", code):
        out.append(("off-by-one tile offset", re.sub(r"\b([bk]\w* \* block_\w+)", r"\1 + 1", line, count=1)))
    if "T.reduce_" in code and "dim=1" in code:
        out.append(("wrong reduction dim", line.replace("dim=1", "dim=0")))
    if "if_then_else(" in code and "+ i" in code:
        out.append(("wrong causal mask bound", line.replace("+ i", "+ i - 1", 1)))
    if re.match(r"\s*T\.(clear|fill)\(", code):
        out.append(("dropped accumulator clear", re.sub(r"T\.(clear|fill)\(.*", "pass", line)))
    if "T.atomic_add(" in code:
        plain = re.sub(r"T\.atomic_add\((\w+\[[^\]]+\]), (.+)\)\s*$", r"\1 = \2", line.rstrip()) + "\n"
        if plain != line:
            out.append(("plain store in split-K", plain))
    if re.match(r"\s*\w+\[[^\]]*\] \*= \w+\[", code):
        out.append(("dropped rescale", re.sub(r"\*= \w+\[[^\]]*\]", "*= 1.0", line, count=1)))
    if "if_then_else(" in code and " >= " in code.split("if_then_else(")[1]:
        out.append(("wrong causal mask bound", line.replace(" >= ", " > ", 1)))
    if "if_then_else(" in code and re.search(r"<=|<", code.split("if_then_else(")[1]):
        out.append(("wrong causal mask bound", line.replace("<=", "<", 1) if "<=" in line else line.replace("<", "<=", 1)))
    # dtypes: a value truncated toward zero through int32 before it is used, an integer output
    store = re.match(r"(\s*\w+\[[^\]]*\] = )(.*)$", line.rstrip("\n"))
    if store and "T.Kernel" not in code:
        load = re.search(r"\b\w+\[[^\]]*\]", store.group(2))
        if load:
            cast = f'T.Cast("float32", T.Cast("int32", {load.group(0)}))'
            out.append(("cast truncation", store.group(1) + store.group(2).replace(load.group(0), cast, 1) + "\n"))
    if re.search(r"= T\.empty\(\(.*\), \w+\)", code):
        out.append(("integer output dtype", re.sub(r"(= T\.empty\(\(.*\), )\w+\)", r"\1T.int32)", line, count=1)))
    # a count compared with a constant: the K loop capped below its real tile count
    # a value rounded to a narrow float before its conversion to an integer (a rounding that moves it a unit)
    for fmt in ("float16", "bfloat16"):
        rounded = _wrap_argument(line, "T.Cast(T.int32, ", f"T.Cast(T.{fmt}, ")
        if rounded:
            out.append(("rounding before int conversion", rounded))
    loop = re.search(r"for \w+ in T\.(Pipelined|serial)\((T\.ceildiv\([^)]*\))", code)
    if loop:
        out.append(("constant cap", line.replace(loop.group(2), f"T.min({loop.group(2)}, 2)", 1)))
        out.append(("constant trip count", line.replace(loop.group(2), "2", 1)))
    capped = re.search(r"for \w+ in T\.(Pipelined|serial)\(T\.min\(.*, (\d+)\)", code)
    if capped:
        out.append(("constant cap", line.replace(f", {capped.group(2)})", ", 2)", 1)))
    return [(op, text) for op, text in out if text != line]


def mutants(kernel_path: Path) -> list[Mutant]:
    text = kernel_path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tiles = tuple(dict.fromkeys(re.findall(r"\b(block_[A-Za-z]\w*|blk_\w+)\b", text)))
    grid = re.search(r"T\.Kernel\(.*\bas \((\w+), (\w+)", text)
    blocks = (grid.group(1), grid.group(2)) if grid else ("bx", "by")
    inside = False
    found: list[Mutant] = []
    for number, line in enumerate(lines, 1):
        if re.match(r"\s*with T\.Kernel\(", line) or re.match(r"\s*def main\(\s*$|\s*def main\(A", line):
            inside = True
        if re.match(r"^(def|if __name__)", line) and "T.Kernel" not in line:
            inside = inside and line.startswith(" ")
        if re.search(r"T\.float32, T\.float32\)", line):  # the call's output dtype made an integer one
            source = "".join(lines[:number - 1] + [line.replace("T.float32, T.float32)", "T.float32, T.int32)")]
                             + lines[number:])
            found.append(Mutant(kernel_path.name, "integer output dtype", number, source))
        if not inside and "T.Kernel(" not in line:
            continue
        for operator, mutated in _line_mutations(line, tiles, blocks):
            source = "".join(lines[:number - 1] + [mutated] + lines[number:])
            try:  # a rewrite across brackets (a cast around part of an index) is no program: not a mutant
                compile(source, kernel_path.name, "exec")
            except SyntaxError:
                continue
            found.append(Mutant(kernel_path.name, operator, number, source))
    return found


def ground_truth_child(paths: list[str]) -> None:
    """In a child: build each file's kernels at their real sizes, run them concretely on
    random inputs, compare with the file's reference run by torch (float64) with the call
    site's arguments.  Run-time sizes (``T.dynamic``) are also run one past the call's size
    (a partial last tile): the compiled kernel must serve every size."""
    import numpy as np
    # imported before the per-mutant alarm: under load an import it cuts stays half-done, and
    # every later mutant then fails with 'partially initialized module' (a run at load 40 lost
    # all 109 ground truths so)
    import tilelang  # noqa: F401
    import torch  # noqa: F401

    from tir_lifter.backends import FloatBackend
    from tir_lifter.capture import run_file
    from tir_lifter.checks import written_buffers
    from tir_lifter.counterexample import fractions_decide, random_inputs
    from tir_lifter.elaborate import _associate, _references, _with_index_samples
    from tir_lifter.interpreter import Machine
    from tir_lifter.program import Var
    from tir_lifter.reference import find_inline_reference, find_reference, launch_tensors
    from tir_lifter.spec import evaluate, spec_from_reference
    from tir_lifter.tvm_frontend import from_primfunc
    import signal

    def overran(signum, frame):
        raise TimeoutError(f"ground truth over {PER_FILE_SECONDS:.0f} s")
    signal.signal(signal.SIGALRM, overran)
    results = {}
    for path in paths:
        signal.alarm(int(PER_FILE_SECONDS))  # a real-size run the interpreter cannot finish: unknown, not a hang
        try:
            capture = run_file(path, 20.0)
            refs = _references(open(path).read())
            names = {i.name for i in capture.instances}
            wrong = False
            for instance in capture.instances:
                kwargs = dict(instance.kwargs)
                func = instance.factory(**kwargs) if instance.factory else instance.jit.get_tir(*instance.args, **kwargs)
                # index tensors: one sample drawn as the file draws them, at the real sizes here
                kernel = _with_index_samples(from_primfunc(func, instance.name, path), instance, capture)
                params = [b.name for b in kernel.params]
                written = list(written_buffers(kernel))
                specs, _ = find_reference([instance], params, written, capture, path)
                if not specs and not _associate(instance.name, refs, len(names)):
                    inline, _ = find_inline_reference([instance], params, written, capture, path)
                    specs = [inline] if inline is not None else []
                if not specs:
                    ref = _associate(instance.name, refs, len(names))
                    specs = [spec_from_reference(ref, [n for n in params if n not in written], written, path)]
                sizes: dict[str, int] = {}
                for launch in capture.launches:
                    if launch.instance is instance:
                        for name, tensor in launch_tensors(launch, params).items():
                            for dim, real in zip(kernel.buffer(name).shape, tensor.shape):
                                if isinstance(dim, Var):
                                    sizes.setdefault(dim.name, int(real))
                variants = [sizes] + ([{k: v + 1 for k, v in sizes.items()}] if sizes else [])
                # fractions too where a conversion shows only on them (small integers are exact through it)
                runs = [(v, False) for v in variants] + [(v, True) for v in variants if fractions_decide(kernel)]
                for variant, fractions in runs:
                    inputs = random_inputs(kernel, variant, seed=7, fractions=fractions)
                    trace = Machine(kernel, variant, FloatBackend(), {k: v.astype(object) for k, v in inputs.items()}
                                    ).run()
                    for spec in specs:
                        expected = evaluate(spec, {n: inputs[n].astype(object) for n in spec.inputs},
                                            FloatBackend())
                        for name in spec.outputs:
                            got = np.asarray(trace.outputs[name], dtype=float)
                            want = np.asarray(expected[name], dtype=float)
                            if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-6) \
                                    or (trace.writers[name] < 0).any() or trace.faults or trace.conflicts:
                                wrong = True
            if not capture.instances:  # no kernel to run: nothing is known (it is not "right")
                raise RuntimeError(f"the run built no kernel ({capture.stopped_by[:60]})")
            results[path] = "wrong" if wrong else "right"
        except Exception as exc:  # noqa: BLE001 - ground truth unknown for this mutant
            results[path] = f"unknown ({type(exc).__name__}: {str(exc)[:80]})"
        finally:
            signal.alarm(0)
        print(json.dumps({path: results[path]}), flush=True)  # one line per mutant: a cut run keeps what it found


def ground_truth(paths: list[str]) -> dict[str, str]:
    from tir_lifter.elaborate_run import child_env
    try:
        done = subprocess.run([sys.executable, __file__, "--ground-truth", *paths], env=child_env(),
                              capture_output=True, text=True, timeout=TRUTH_SECONDS)
        out = done.stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
    found: dict[str, str] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            found.update(json.loads(line))
    return {p: found.get(p, "unknown (ground truth not reached)") for p in paths}


def _key(mutant_or_row, seen: collections.Counter) -> tuple:
    """(kernel file, operator, line, rank among the same three): the same mutant in two runs of
    the same generator over the same kernel text."""
    if isinstance(mutant_or_row, dict):
        base = (Path(mutant_or_row["kernel"]).name, mutant_or_row["operator"], mutant_or_row["line"])
    else:
        base = (Path(mutant_or_row.kernel).name, mutant_or_row.operator, mutant_or_row.line)
    seen[base] += 1
    return base + (seen[base],)


def _digest(mutant: Mutant) -> str:
    return hashlib.sha256(mutant.source.encode()).hexdigest()[:16]


def _stored_truths(path: Path, all_mutants: list[Mutant], paths: list[str]) -> dict[str, str]:
    """The ground truth an earlier run's rows hold for these mutants: by the mutant's text where
    the row records its digest, else by kernel file, operator, line and rank."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    seen: collections.Counter = collections.Counter()
    by_key = {_key(row, seen): row for row in rows}
    seen = collections.Counter()
    found = {}
    for p, mutant in zip(paths, all_mutants):
        row = by_key.get(_key(mutant, seen))
        if row is not None and row.get("digest", _digest(mutant)) == _digest(mutant):
            found[p] = row["truth"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--ground-truth", nargs="*")
    parser.add_argument("--seconds", type=float, default=3600.0, help="wall time for the lifter's verdicts")
    parser.add_argument("--jobs", type=int, default=1, help="elaboration children checking the mutants")
    parser.add_argument("--kernel", action="append", help="only this bundled kernel file (repeatable)")
    parser.add_argument("--truth-seconds", type=float, default=TRUTH_SECONDS,
                        help="wall time for the ground-truth runs (mutants not reached: unknown)")
    parser.add_argument("--truth-from", type=Path,
                        help="an earlier run's --json: a mutant it holds (the same kernel file, operator, line and "
                             "rank among that line's mutants of the operator) keeps its ground truth, not re-run")
    args = parser.parse_args()
    if args.ground_truth is not None:
        ground_truth_child(args.ground_truth)
        return
    globals()["TRUTH_SECONDS"] = args.truth_seconds
    from tir_lifter.elaborate_run import report_from_json, run_batch
    kernels = args.kernel or KERNELS
    all_mutants = [m for name in kernels for m in mutants(ROOT / "examples" / "kernels" / name)]
    all_mutants = all_mutants[: args.limit or None]
    with tempfile.TemporaryDirectory(prefix="kernel-mutants-") as tmp:
        paths = []
        for index, mutant in enumerate(all_mutants):
            path = Path(tmp) / f"m{index:03d}_{mutant.kernel}"
            path.write_text(mutant.source, encoding="utf-8")
            paths.append(str(path))
        size = (len(paths) + args.jobs - 1) // args.jobs  # one child per job: the tool's verdicts on its share
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            parts = list(pool.map(lambda chunk: run_batch(chunk, timeout=args.seconds),
                                  [paths[i:i + size] for i in range(0, len(paths), size)]))
        by_path = {b["file"]: b for part in parts for b in part}
        bodies = [by_path[os.path.abspath(p)] for p in paths]
        cut = [p for p, b in zip(paths, bodies) if b.get("internal_error") == "batch child died or overran"]
        paths_checked = [p for p in paths if p not in cut]
        # a violation comes with a counterexample already re-run concretely; the ground truth
        # (real sizes, torch reference) is needed for every other verdict, verified above all
        undecided = [p for p, b in zip(paths, bodies) if p not in cut and ("internal_error" in b or
                     report_from_json(b).verdict != "violations")]
        stored = _stored_truths(args.truth_from, all_mutants, paths) if args.truth_from else {}
        truth = {p: stored[p] for p in undecided if p in stored}
        todo = [p for p in undecided if p not in stored]
        truth.update(ground_truth(todo) if todo else {})
        if args.truth_from:
            print(f"ground truth of {len(undecided) - len(todo)} mutants from {args.truth_from.name}, "
                  f"{len(todo)} run", flush=True)
        rejected = {p for p, b in zip(paths, bodies) if any(d.get("check") == "build" for d in b.get("diagnostics", []))}
        truth.update({p: "wrong (TileLang rejects it at the file's sizes)" if p in rejected else
                      "wrong (confirmed counterexample)" for p in paths_checked if p not in truth})
    rows = []
    for mutant, path, body in zip(all_mutants, paths, bodies):
        if path in cut:
            continue  # not reached within --seconds
        verdict = "error" if "internal_error" in body else report_from_json(body).verdict
        errors = [d for d in body.get("diagnostics", []) if d.get("severity") == "error" and d["check"] != "unsupported"]
        through = {int(n) for d in errors for n in re.findall(r"\d+", (re.findall(
            r"comes through lines ([\d, and]+)", d["message"]) or [""])[0])}
        through |= {int(n) for d in errors for n in re.findall(r"builds it at line (\d+)", d["message"])}
        through |= {int(n) for d in errors for written in re.findall(r"is written at lines? ([\d, ]+), which miss",
                                                                      d["message"]) for n in re.findall(r"\d+", written)}
        windows = [(int(a), int(b)) for d in errors for a, b in re.findall(r"between lines (\d+) and (\d+)", d["message"])]
        named = "exact" if any(d.get("line") == mutant.line for d in errors) else \
            "listed" if mutant.line in through else \
            "window" if any(a <= mutant.line <= b for a, b in windows) else "no" if errors else ""
        latent = any(d.get("check") == "latent" for d in body.get("diagnostics", []))
        rows.append({"kernel": mutant.kernel, "operator": mutant.operator, "line": mutant.line, "verdict": verdict,
                     "truth": truth.get(path, "unknown"), "line_named": named, "latent": latent,
                     "line_reported": sorted({d.get("line") for d in errors if d.get("line") is not None}),
                     "digest": _digest(mutant)})
        print(f"{verdict:12s} truth={truth.get(path, 'unknown')[:40]:12s} {mutant.kernel}:{mutant.line} "
              f"{mutant.operator}", flush=True)
    table = collections.Counter((r["truth"].split(" ")[0], r["verdict"]) for r in rows)
    print(f"\n{len(rows)} of {len(all_mutants)} mutants checked within --seconds, over {len(kernels)} kernels")
    for (truth_value, verdict), count in sorted(table.items()):
        print(f"  truth {truth_value:8s} verdict {verdict:12s} {count}")
    violations = [r for r in rows if r["verdict"] == "violations"]
    named = collections.Counter(r["line_named"] for r in violations)
    print(f"violations naming the mutated line: {named['exact']} as their line, {named['listed']} more among the "
          f"lines the wrong value came through, the call that built the kernel or the writes that missed an element, {named['window']} a dropped "
          f"statement inside the lines the report says it belongs between, {named['no']} not, of {len(violations)}")
    print(f"latent findings (worded as sizes the file does not build): {sum(r['latent'] for r in rows)}")
    by_operator = collections.Counter((r["operator"], r["verdict"]) for r in rows)
    for (operator, verdict), count in sorted(by_operator.items()):
        print(f"  {operator:28s} {verdict:12s} {count}")
    false_verified = [r for r in rows if r["verdict"] == "verified" and r["truth"] != "right"]
    print(f"wrong or unknown mutants called verified: {len(false_verified)} (goal 0)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    main()
