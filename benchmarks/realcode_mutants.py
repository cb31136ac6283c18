"""Mutated twins of realcode entries (``python benchmarks/realcode.py --mutants``).

Each mutant changes one line of an installed library file: a collective dropped, a backward reduction
missing, a split or gather dim swapped.  The library's top-level package is copied into a temporary
directory (a tree of links to the installed files, with the one mutated file a real copy: the
installed files are never written) and put first on the import path; the ground truth runs there,
and the tool is pointed at the entry's file in the copy (``--path`` the copy).  A mutant counts as
found when the tool reports a violation at the mutated line of the mutated file: the error's ``file``
is that file (a module of the package the op ran in), or names no file when the mutated file is the
entry's own.

Lines are pinned to the versions of the ``realcode`` extra; a mutant whose line no longer holds its
text is reported as stale, not run.
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mutant:
    entry: str          # key of the realcode entry
    file: str           # path inside site-packages
    line: int
    old: str            # text on that line, replaced by ``new``
    new: str
    kind: str           # "drop collective" | "missing backward reduction" | "wrong dim" | "swap collective"

    @property
    def key(self) -> str:
        return f"{self.entry} @ {self.file}:{self.line} ({self.kind})"


NEAR = 3   # lines above the mutated one that still count as naming it (where a dropped collective belongs)
MG_MAP = "megatron/core/tensor_parallel/mappings.py"
MG_LAYERS = "megatron/core/tensor_parallel/layers.py"
MG_CE = "megatron/core/tensor_parallel/cross_entropy.py"
FS_MAP = "fairscale/nn/model_parallel/mappings.py"
FS_LAYERS = "fairscale/nn/model_parallel/layers.py"
FS_CE = "fairscale/nn/model_parallel/cross_entropy.py"
HF_TP = "transformers/integrations/tensor_parallel.py"
YC_A2A = "yunchang/comm/all_to_all.py"
DS_SEQ = "deepspeed/sequence/layer.py"
TT_UTILS = "torchtitan/distributed/utils.py"
MG = "megatron-core:megatron.core."
FS = "fairscale:fairscale.nn.model_parallel."
HF = "transformers:transformers.integrations.tensor_parallel."
YC = "yunchang:yunchang.comm.all_to_all."
DS = "deepspeed:deepspeed.sequence.layer."
# A collective that fills a buffer in place (all_to_all_single) is dropped as ``output.copy_(input_t)``:
# the buffer then holds the rank's own blocks, not uninitialised memory (a reproducible ground truth).
A2A_OLD = "dist.all_to_all_single(output, input_t, group=group)"
A2A_NEW = "output.copy_(input_t)"
DS_A2A = "dist.all_to_all_single(output, input_t, group=group, async_op=async_op)"

MUTANTS = [
    Mutant(MG + "tensor_parallel.layers.ColumnParallelLinear[gather_output]", MG_MAP, 94,
           "torch.cat(tensor_list, dim=-1)", "torch.cat(tensor_list, dim=0)", "wrong dim"),
    Mutant(MG + "tensor_parallel.layers.ColumnParallelLinear[sharded_output]", MG_LAYERS, 544,
           "handle = torch.distributed.all_reduce(grad_input, group=tp_group, async_op=True)",
           "handle = torch.distributed.barrier(group=tp_group, async_op=True)", "missing backward reduction"),
    Mutant(MG + "tensor_parallel.layers.ColumnParallelLinear[gather_output]", MG_LAYERS, 1047,
           "output = gather_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)",
           "output = output_parallel", "drop collective"),
    Mutant(MG + "tensor_parallel.layers.RowParallelLinear[split_input]", MG_LAYERS, 1294,
           "output_ = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)",
           "output_ = output_parallel", "drop collective"),
    Mutant(MG + "tensor_parallel.layers.RowParallelLinear[parallel_input]", MG_LAYERS, 1294,
           "output_ = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)",
           "output_ = copy_to_tensor_model_parallel_region(output_parallel, group=self.tp_group)",
           "swap collective"),
    Mutant(MG + "transformer.mlp.MLP", MG_LAYERS, 1294,
           "output_ = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)",
           "output_ = output_parallel", "drop collective"),
    Mutant(MG + "tensor_parallel.layers.VocabParallelEmbedding", MG_LAYERS, 300,
           "output = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)",
           "output = output_parallel", "drop collective"),
    Mutant(MG + "tensor_parallel.cross_entropy.vocab_parallel_cross_entropy", MG_CE, 154,
           "torch.distributed.all_reduce(", "(lambda *a, **k: None)(", "drop collective"),
    Mutant(MG + "tensor_parallel.mappings.scatter_to_tensor_model_parallel_region", MG_MAP, 253,
           "return _gather_along_last_dim(grad_output, ctx.group), None",
           "return _split_along_last_dim(grad_output, ctx.group), None", "swap collective"),
    Mutant(MG + "tensor_parallel.mappings.scatter_to_sequence_parallel_region", MG_MAP, 282,
           "return _split_along_first_dim(input_, group)", "return _split_along_last_dim(input_, group)",
           "wrong dim"),
    Mutant(MG + "tensor_parallel.mappings.all_to_all_sp2hp", MG_MAP, 566,
           "output = all_to_all(group, concat_tensor)", "output = concat_tensor", "drop collective"),
    Mutant(MG + "tensor_parallel.mappings.all_to_all_hp2sp", MG_MAP, 590,
           "input_exchanged = all_to_all(group, input_)", "input_exchanged = input_", "drop collective"),
    Mutant(FS + "layers.ColumnParallelLinear[gather_output]", FS_LAYERS, 293,
           "output = gather_from_model_parallel_region(output_parallel)", "output = output_parallel",
           "drop collective"),
    Mutant(FS + "layers.ColumnParallelLinear[sharded_output]", FS_LAYERS, 288,
           "input_parallel = copy_to_model_parallel_region(input_)", "input_parallel = input_",
           "missing backward reduction"),
    Mutant(FS + "layers.RowParallelLinear[split_input]", FS_LAYERS, 382,
           "output_ = reduce_from_model_parallel_region(output_parallel)", "output_ = output_parallel",
           "drop collective"),
    Mutant(FS + "layers.RowParallelLinear[parallel_input]", FS_LAYERS, 382,
           "output_ = reduce_from_model_parallel_region(output_parallel)",
           "output_ = copy_to_model_parallel_region(output_parallel)", "swap collective"),
    Mutant(FS + "layers.VocabParallelEmbedding", FS_LAYERS, 148,
           "output = reduce_from_model_parallel_region(output_parallel)", "output = output_parallel",
           "drop collective"),
    Mutant(FS + "layers.ParallelEmbedding", FS_LAYERS, 204,
           "input_parallel = copy_to_model_parallel_region(input_)", "input_parallel = input_",
           "missing backward reduction"),
    Mutant(FS + "mappings.scatter_to_model_parallel_region", FS_MAP, 123,
           "return _gather(grad_output)", "return _split(grad_output)", "swap collective"),
    Mutant(FS + "cross_entropy.vocab_parallel_cross_entropy", FS_CE, 69,
           "torch.distributed.all_reduce(", "(lambda *a, **k: None)(", "drop collective"),
    Mutant("transformers:transformers.integrations.tensor_parallel.ColwiseParallel[sharded_output]", HF_TP, 697,
           "return all_reduce_backward(input_tensor, device_mesh)", "return input_tensor",
           "missing backward reduction"),
    Mutant("transformers:transformers.integrations.tensor_parallel.RowwiseParallel", HF_TP, 836,
           "outputs = all_reduce_forward(outputs, device_mesh)", "outputs = outputs", "drop collective"),
    # Entries of the other libraries whose unmutated ground truth agrees and that the tool checks today
    # (litgpt's entries differ from one device unmutated: no correct twin to mutate; accelerate's
    # ``broadcast`` gives every rank the same values, so no mutant of it can differ).
    Mutant(MG + "tensor_parallel.mappings.gather_from_tensor_model_parallel_region", MG_MAP, 268,
           "return _gather_along_last_dim(input_, group)", "return input_", "drop collective"),
    Mutant(FS + "mappings.gather_from_model_parallel_region", FS_MAP, 131,
           "return _gather(input_)", "return input_", "drop collective"),
    Mutant(HF + "all_gather", HF_TP, 502, "torch.cat(tensor_list, dim=last_dim)", "torch.cat(tensor_list, dim=0)",
           "wrong dim"),
    Mutant(HF + "split", HF_TP, 530, "return chunks[rank].contiguous()", "return chunks[0].contiguous()",
           "wrong split"),
    Mutant(HF + "ColwiseParallel[gather_output]", HF_TP, 701, "return all_gather(outputs, device_mesh)",
           "return outputs", "drop collective"),
    Mutant(HF + "RowwiseParallel[split_input]", HF_TP, 836, "outputs = all_reduce_forward(outputs, device_mesh)",
           "outputs = outputs", "drop collective"),
    Mutant(YC + "SeqAllToAll4D[seq_to_head]", YC_A2A, 56, A2A_OLD, A2A_NEW, "drop collective"),
    Mutant(YC + "SeqAllToAll4D[head_to_seq]", YC_A2A, 90, A2A_OLD, A2A_NEW, "drop collective"),
    Mutant(YC + "SeqAllToAll5D", YC_A2A, 180, A2A_OLD, A2A_NEW, "drop collective"),
    Mutant(DS + "single_all_to_all", DS_SEQ, 297, DS_A2A, A2A_NEW, "drop collective"),
    Mutant(DS + "_SeqAllToAll[head_to_seq]", DS_SEQ, 297, DS_A2A, A2A_NEW, "drop collective"),
    Mutant(DS + "_SeqAllToAll[seq_to_head]", DS_SEQ, 460,
           "_SeqAllToAll.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx,",
           "_SeqAllToAll.apply(ctx.group, *grad_output, ctx.scatter_idx, ctx.gather_idx,", "swap backward dims"),
    Mutant("torchtitan:torchtitan.distributed.utils.dist_sum_tensor", TT_UTILS, 129,
           "x = funcol.all_reduce(x, reduceOp=reduceOp, group=mesh)", "x = x", "drop collective"),
]


def site_packages_of(relative: str) -> Path:
    top = relative.split("/")[0]
    spec = importlib.util.find_spec(top)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise LookupError(f"package {top} is not installed")
    return Path(locations[0]).parent


def materialize(m: Mutant, into: Path, entry_module: str | None = None) -> Path:
    """``into``/<package>: links to the installed package's files; the mutated file and the entry's
    own file are real copies (the tool locates a file by its real path)."""
    real = {m.file} | ({Path(*entry_module.split(".")).with_suffix(".py").as_posix()} if entry_module else set())
    site = site_packages_of(m.file)
    top = m.file.split("/")[0]
    source_root = site / top
    for dirpath, dirnames, filenames in os.walk(source_root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel = Path(dirpath).relative_to(site)
        (into / rel).mkdir(parents=True, exist_ok=True)
        for f in filenames:
            if f.endswith((".pyc",)):
                continue
            target = into / rel / f
            if (rel / f).as_posix() in real:
                shutil.copyfile(Path(dirpath) / f, target)
            else:
                os.symlink(Path(dirpath) / f, target)
    lines = (site / m.file).read_text().splitlines(keepends=True)
    (into / m.file).unlink(missing_ok=True)
    if m.old not in lines[m.line - 1]:
        raise ValueError(f"stale mutant: {m.file}:{m.line} does not hold {m.old!r}")
    lines[m.line - 1] = lines[m.line - 1].replace(m.old, m.new, 1)
    (into / m.file).write_text("".join(lines))
    return into


def _in_mutated_file(m: Mutant, entry_module: str, file: str | None) -> bool:
    """An error's ``file`` is the mutated library file: named (a module of the package the checked file
    belongs to), or none named when the checked file (the entry's module) is the mutated one."""
    if file is None:
        return Path(*entry_module.split(".")).with_suffix(".py").as_posix() == m.file
    return ("/" + file.replace("\\", "/")).endswith("/" + m.file)


def main(args) -> int:
    import realcode
    import realcode_entries as entries

    chosen = [m for m in MUTANTS if not args.entries or any(s in m.key for s in args.entries)]
    def one(m: Mutant) -> dict:
        entry = entries.by_key(m.entry)
        with tempfile.TemporaryDirectory(prefix="realcode_mutant_") as tmp:
            root = Path(tmp)
            try:
                materialize(m, root, entry.module)
            except (ValueError, LookupError) as error:
                return {"mutant": m.key, "stale": str(error)}
            salt = "_m" + hashlib.sha256(repr(m).encode()).hexdigest()[:10]
            truth = realcode.ground_truths([entry], args.gt_timeout, extra_path=str(root), hash_salt=salt)[entry.key]
            target = root / Path(*entry.module.split(".")).with_suffix(".py")
            res = realcode.run_tool(entry, args.timeout, target=str(target), extra=("--path", str(root)))
        located = res.get("located", [(line, None) for line, _ in res["violations"]])
        at_line = any(line == m.line and _in_mutated_file(m, entry.module, file) for line, file in located)
        # a collective dropped leaves no op on its line: the tool names the line after which it belongs
        near = any(line is not None and m.line - NEAR <= line <= m.line and _in_mutated_file(m, entry.module, file)
                   for line, file in located)
        realcode.log(f"  {m.key}: truth {truth.status}, tool {res['verdict']}, at the mutated line: {at_line}")
        return {"mutant": m.key, "kind": m.kind, "truth": truth.status, "tool": res, "at_line": at_line,
                "near_line": near}

    with cf.ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, chosen))
    print(f"| mutant | ground truth | tool | violation at the mutated line (or up to {NEAR} lines above) |")
    print("|---|---|---|---|")
    for r in rows:
        if "stale" in r:
            print(f"| {r['mutant']} | stale | - | - |")
            continue
        where = "yes" if r["at_line"] else ("above" if r.get("near_line") else "no")
        print(f"| {r['mutant']} | {r['truth']} | {r['tool']['verdict']} | {where} |")
    run = [r for r in rows if "stale" not in r]
    differ = [r for r in run if r["truth"] == "differ"]
    print()
    print(f"{len(run)} mutants run; ground truth differs for {len(differ)}; the tool reports violations for "
          f"{sum(r['tool']['verdict'] == 'violations' for r in differ)} of those, at the mutated line for "
          f"{sum(r['at_line'] for r in differ)} (up to {NEAR} lines above: {sum(r.get('near_line', False) for r in differ)}); "
          f"false verified: "
          f"{sum(r['tool']['verdict'] == 'verified' for r in differ)}")
    print("verdicts: " + ", ".join(f"{k}: {n}" for k, n in Counter(r["tool"]["verdict"] for r in run).items()))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0
