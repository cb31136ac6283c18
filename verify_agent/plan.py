"""``verify-agent plan FILE``: a whole training step on the user's own model code and parallel sizes.

The file holds the user's model as ``translate`` runs it (``example_module()`` building it from the
user's own ``TransformerConfig`` at reduced sizes, ``example_inputs()``) and the real plan as a
literal ``TRAINING_PLAN = {...}`` keyed by megatron-core's own argument names (``num_layers``,
``hidden_size``, ``tensor_model_parallel_size``, ``pipeline_model_parallel_size``,
``data_parallel_size``, ``num_microbatches``, ...).  Two proofs make the verdict:

1. **the layers, as the user's real code**: the file's model (embedding, its transformer layers,
   final norm, LM head and loss — megatron-core's real classes) is traced forward and backward on
   one device and on tensor-parallel ranks and proven equal (``translate``'s traced check).  One
   traced layer stands for every layer of the plan built by the same code from the same config
   flags: the layers of one kind differ only in their sizes and parameter values.
2. **the step around them, at the real sizes**: the plan's pipeline schedule (1F1B, the sends and
   receives between stages, deadlock freedom), the gradient synchronisation over data parallelism
   (all-reduce, or reduce-scatter with the distributed optimizer) at the real ``dp``, the
   tensor-parallel gradient sync of sequence-parallel norm weights, the micro-batch loss scaling
   and gradient accumulation, and the real sizes' divisibility — ``verifier.scale``'s composition
   (the same walk as ``benchmarks/scale.py``), on its block programs built with the plan's sizes.

What the induction assumes (printed with every verdict): the real layers are the traced layers at
other sizes (sizes enter the code only as sizes; the traced run's tensor-parallel size is 2, the
plan's may be larger: code combining the size non-linearly is not excluded by the layer proof,
only by the composed step's blocks, which run at the real tensor-parallel size); the pipeline
schedule and gradient synchronisation are megatron-core's as the composition models them, not
recorded from the user's run.
"""
from __future__ import annotations

import ast
import resource
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from verifier.report import UNSUPPORTED, VERIFIED, VIOLATIONS

PLAN_VARIABLE = "TRAINING_PLAN"

# megatron-core argument name -> (verifier.scale field, required)
MODEL_KEYS = {"num_layers": ("layers", True), "hidden_size": ("hidden", True),
              "num_attention_heads": ("heads", True), "vocab_size": ("vocab", True),
              "seq_length": ("seq", True), "ffn_hidden_size": ("ffn", False),
              "num_query_groups": ("kv_heads", False), "kv_channels": ("head_dim", False)}
PARALLEL_KEYS = {"tensor_model_parallel_size": ("tp", 1), "pipeline_model_parallel_size": ("pp", 1),
                 "data_parallel_size": ("dp", 1), "num_microbatches": ("microbatches", 1),
                 "virtual_pipeline_model_parallel_size": ("chunks", 1)}
FLAG_KEYS = {"sequence_parallel", "use_distributed_optimizer"}


class PlanError(Exception):
    """The file's plan cannot be read: one sentence naming the line."""

    def __init__(self, message: str, line: Optional[int] = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class PlanResult:
    verdict: str
    plan: dict[str, Any]
    layers: Optional[Any] = None            # translate's Report on the user's code
    step: Optional[Any] = None              # verifier.scale ScaleReport of the composed step
    assumptions: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0


def read_plan(path: Path) -> tuple[dict[str, Any], int]:
    """The literal ``TRAINING_PLAN`` dict of the file and its line (read, never run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as error:
        raise PlanError(f"cannot read {path}: {error}") from error
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        if any(isinstance(t, ast.Name) and t.id == PLAN_VARIABLE for t in targets) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except ValueError as error:
                raise PlanError(f"{PLAN_VARIABLE} must be a literal dict of sizes and flags", node.lineno) from error
            if not isinstance(value, dict):
                raise PlanError(f"{PLAN_VARIABLE} must be a dict", node.lineno)
            unknown = set(value) - set(MODEL_KEYS) - set(PARALLEL_KEYS) - FLAG_KEYS
            if unknown:
                raise PlanError(f"{PLAN_VARIABLE}: unknown key(s) {', '.join(sorted(unknown))} (known: "
                                f"{', '.join(sorted([*MODEL_KEYS, *PARALLEL_KEYS, *FLAG_KEYS]))})", node.lineno)
            return value, node.lineno
    raise PlanError(f"no {PLAN_VARIABLE} = {{...}} in the file (the real plan: megatron-core argument names "
                    f"with their sizes)")


def scale_plan(name: str, given: dict[str, Any], line: int):
    """The ``verifier.scale`` plan of the user's sizes."""
    from verifier.scale.plans import Model, Parallel, Plan

    missing = [key for key, (_, required) in MODEL_KEYS.items() if required and key not in given]
    if missing:
        raise PlanError(f"{PLAN_VARIABLE}: missing {', '.join(missing)}", line)
    if any(type(given[k]) is not int or given[k] < 1 for k in given if k not in FLAG_KEYS):
        raise PlanError(f"{PLAN_VARIABLE}: sizes must be positive integers", line)
    hidden, heads = given["hidden_size"], given["num_attention_heads"]
    if hidden % heads and "kv_channels" not in given:
        raise PlanError(f"{PLAN_VARIABLE}: hidden_size {hidden} is not a multiple of num_attention_heads {heads} "
                        f"(give kv_channels)", line)
    model = Model(name, layers=given["num_layers"], hidden=hidden, ffn=given.get("ffn_hidden_size", 4 * hidden),
                  heads=heads, kv_heads=given.get("num_query_groups", heads),
                  head_dim=given.get("kv_channels", hidden // heads), vocab=given["vocab_size"],
                  seq=given["seq_length"])
    sizes = {field_name: given.get(key, default) for key, (field_name, default) in PARALLEL_KEYS.items()}
    if sizes["tp"] > 1 and given.get("sequence_parallel") is False:
        raise PlanError(f"{PLAN_VARIABLE}: the composed step models tensor parallelism with sequence parallelism "
                        f"(megatron-core's layout); sequence_parallel=False is not modelled", line)
    try:
        parallel = Parallel(zero=bool(given.get("use_distributed_optimizer", False)), **sizes)
    except ValueError as error:
        raise PlanError(f"{PLAN_VARIABLE}: {error}", line) from error
    return Plan(name, model, parallel)


def check_plan_file(path: Path, *, timeout: float, workers: int = 1, progress=None) -> PlanResult:
    """Prove the file's layers (traced, its real code) and the plan's step (composed at the real sizes)."""
    from verifier.scale import check_plan

    from .traced import trace_and_verify

    started = _cpu_seconds()
    given, line = read_plan(path)
    plan = scale_plan(path.stem, given, line)
    layers = trace_and_verify(path.read_text(encoding="utf-8"), str(path), entry=None, mesh="tp=2", inputs={},
                              layouts=[], timeout=timeout, progress=progress)
    layer_report = layers.report if layers is not None else None
    step = check_plan(plan, workers=workers)
    verdicts = [layer_report.verdict if layer_report is not None else UNSUPPORTED, step.verdict]
    verdict = VIOLATIONS if VIOLATIONS in verdicts else VERIFIED if set(verdicts) == {VERIFIED} else UNSUPPORTED
    p = plan.parallel
    assumptions = [
        f"the layers are the file's own code traced at its reduced sizes (one device against tensor-parallel "
        f"ranks, forward and backward); each of the plan's {plan.model.layers} layers is taken to be that code "
        f"at other sizes (one kind, one config: one proof)",
        f"the traced run's tensor-parallel size is 2; the plan's tp={p.tp} is covered by "
        f"the composed step's blocks at the real size, not by the traced layer proof",
        f"pipeline schedule ({p.schedule}, pp={p.pp}, {p.microbatches} micro-batches), gradient synchronisation "
        f"(dp={p.dp}, {'reduce-scatter: distributed optimizer' if p.zero else 'all-reduce'}) and micro-batch loss "
        f"scaling are megatron-core's as verifier.scale models them, at the real sizes; not recorded from the "
        f"file's run",
    ]
    return PlanResult(verdict, given, layer_report, step, assumptions, _cpu_seconds() - started)


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (the tracing child, the proof workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def to_json(result: PlanResult, path: str) -> dict[str, Any]:
    layers = result.layers
    return {"verdict": result.verdict, "file": path, "plan": result.plan,
            "layers": None if layers is None else {
                "verdict": layers.verdict, "proven": list(layers.proven),
                "diagnostics": [{"check": d.check, "severity": d.severity, "line": d.line, "file": d.file,
                                 "message": d.message}
                                for d in layers.diagnostics if d.severity != "note"]},
            "step": None if result.step is None else {k: v for k, v in result.step.to_json().items()
                                                      if k in ("verdict", "ops", "ranks", "seconds", "peak_mib",
                                                               "findings", "proven")},
            "assumptions": result.assumptions, "stats": {"cpu_seconds": round(result.cpu_seconds, 2)}}


def render(result: PlanResult, path: str) -> str:
    lines = []
    layers, step = result.layers, result.step
    lines.append(f"layers (your code, traced): {layers.verdict if layers is not None else 'not traced'}")
    if layers is not None:
        for d in layers.diagnostics:
            if d.severity != "note":
                lines.append(f"  {d.severity} [{d.check}] {path}:{d.line}: {d.message}")
    if step is not None:
        lines.append(f"step at the real sizes: {step.verdict}: {step.ops} ops on {step.ranks} ranks, "
                     f"{step.stats.get('proofs', 0)} proofs for {step.stats.get('instances', 0)} block instances")
        lines += [f"  {finding}" for finding in step.findings]
        lines += [f"  proven: {item}" for item in step.proven]
    lines += [f"  assumed: {item}" for item in result.assumptions]
    lines.append(f"{result.verdict.upper()}  {path}  {step.ranks if step else '?'} ranks  "
                 f"{result.cpu_seconds:.1f} CPU s")
    return "\n".join(lines)
