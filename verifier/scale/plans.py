"""Full training plans: models, parallel layouts, and the unrolled training program.

A ``Plan`` is a model (layer count, hidden sizes, attention and MoE shape) plus a parallel
layout (data, tensor, pipeline and expert parallelism, microbatches, schedule, ZeRO).
``TrainingProgram(plan)`` is the training step it runs, unrolled: for every microbatch,
the forward and backward of every block of every layer on its pipeline stage, the
pipeline sends and receives, then the gradient synchronisation whose results the
optimizer consumes.  The program is never materialised: ``segments()`` yields it block by
block (each an IR program on the mesh dims the block uses, dims symbolic and bound to the
real sizes), ``schedule()`` gives the pipeline schedule, and ``count_ops`` counts the ops
of the whole unrolled program from the per-block counts.

Layout conventions (Megatron-LM's):

* mesh ``pp, dp, [ep,] tp`` (major to minor); for MoE plans expert parallelism is carved
  out of data parallelism, so the data-parallel degree is ``dp * ep`` and the number of
  ranks is ``pp * dp * ep * tp``;
* sequence parallelism: between blocks the residual stream of one sequence is split
  along the sequence over ``tp`` (``S(0)``); each block all-gathers it, runs
  column-/row-parallel linears and reduce-scatters back; norm (and router, MLA
  down-projection) weights are replicated over ``tp`` and their gradients all-reduced
  over ``tp``;
* one sequence per microbatch and data-parallel replica (micro-batch size 1); the loss of
  a microbatch is the mean over its tokens divided by the number of microbatches;
  gradients are accumulated over microbatches and averaged over data-parallel replicas
  (all-reduce, or reduce-scatter with ZeRO: each replica's optimizer gets its shard);
* MoE layers (DeepSeek): a replicated router (its top-k gate is one row-wise function of
  the router logits), every token dispatched to every expert weighted by its gate (zero
  for experts not chosen: the same values as sparse top-k dispatch, more traffic, no
  capacity limit), expert-parallel ``all_to_all`` dispatch and combine over ``ep``,
  experts not tensor-parallel (each ``tp`` rank dispatches its own sequence shard;
  expert weights are replicated over ``tp`` and ``dp``), shared experts tensor-parallel;
* MLA attention (DeepSeek-V2/V3) as low-rank query and key/value compression with
  per-head up-projections and the real head counts; the decoupled RoPE key is left out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterator

from ..ir import Mesh, Program
from ..temporal import Schedule, generate
from . import blocks
from .faults import Fault, NO_FAULT


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    ffn: int                # dense MLP intermediate size
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    seq: int = 8192
    attention: str = "gqa"  # "gqa" (grouped-query / multi-head) or "mla"
    q_lora: int = 0         # MLA: query compression rank
    kv_lora: int = 0        # MLA: key/value compression rank
    qk_head_dim: int = 0    # MLA: query/key head dim (nope + rope parts)
    v_head_dim: int = 0     # MLA: value head dim
    experts: int = 0        # routed experts (0: dense model)
    top_k: int = 0
    shared_experts: int = 0
    moe_ffn: int = 0        # intermediate size of one expert
    dense_layers: int = 0   # the first layers use a dense MLP

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    def layer_kind(self, layer: int) -> str:
        return "moe" if self.is_moe and layer >= self.dense_layers else "dense"


@dataclass(frozen=True)
class Parallel:
    dp: int                 # data-parallel degree (for MoE plans: including ep)
    tp: int = 1
    pp: int = 1
    ep: int = 1             # expert parallelism, carved out of dp
    microbatches: int = 1
    schedule: str = "1f1b"
    chunks: int = 1         # model chunks per pipeline rank (interleaved schedule)
    zero: bool = False      # ZeRO-1 / distributed optimizer: reduce-scatter gradients over dp

    def __post_init__(self) -> None:
        if self.dp % self.ep:
            raise ValueError(f"expert parallelism ep={self.ep} must divide the data-parallel degree dp={self.dp}")

    @property
    def dp_replicas(self) -> int:
        """Replicas over the ``dp`` mesh dim (data parallelism outside expert parallelism)."""
        return self.dp // self.ep


@dataclass(frozen=True)
class Plan:
    name: str
    model: Model
    parallel: Parallel
    published: str = ""     # published verification cost, for the benchmark table

    @property
    def mesh(self) -> Mesh:
        p = self.parallel
        dims = [("pp", p.pp), ("dp", p.dp_replicas)]
        if self.model.is_moe:
            dims.append(("ep", p.ep))
        dims.append(("tp", p.tp))
        return Mesh(tuple(dims))

    @property
    def ranks(self) -> int:
        return self.mesh.world

    @property
    def virtual_stages(self) -> int:
        return self.parallel.pp * self.parallel.chunks

    def stage_layers(self) -> list[range]:
        """Layers of each virtual stage, contiguous and in order: balanced, and when the count
        does not divide, the stages holding the head and the embedding give up a layer first
        (then inwards, alternating) — Llama-3 405B's [7, 8 x 14, 7] on 16 stages."""
        stages = self.virtual_stages
        per = math.ceil(self.model.layers / stages)
        sizes = [per] * stages
        alternating = dict.fromkeys(i for pair in zip(range(stages - 1, -1, -1), range(stages)) for i in pair)
        for stage in list(alternating)[:per * stages - self.model.layers]:
            sizes[stage] -= 1
        ranges, start = [], 0
        for size in sizes:
            ranges.append(range(start, start + size))
            start += size
        return ranges

    def small(self, layers: int, **parallel: int) -> "Plan":
        """The same model with fewer layers and a smaller layout (for tests)."""
        model = replace(self.model, layers=layers, dense_layers=min(self.model.dense_layers, max(layers - 1, 0)))
        return replace(self, name=f"{self.name}-small", model=model, parallel=replace(self.parallel, **parallel))


LLAMA3_8B = Model("llama3-8b", layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256)
LLAMA3_70B = Model("llama3-70b", layers=80, hidden=8192, ffn=28672, heads=64, kv_heads=8, head_dim=128, vocab=128256)
LLAMA3_405B = Model("llama3-405b", layers=126, hidden=16384, ffn=53248, heads=128, kv_heads=8, head_dim=128,
                    vocab=128256)
DEEPSEEK_MOE_16B = Model("deepseek-moe-16b", layers=28, hidden=2048, ffn=10944, heads=16, kv_heads=16, head_dim=128,
                         vocab=102400, seq=4096, experts=64, top_k=6, shared_experts=2, moe_ffn=1408, dense_layers=1)
DEEPSEEK_V2_236B = Model("deepseek-v2-236b", layers=60, hidden=5120, ffn=12288, heads=128, kv_heads=128,
                         head_dim=128, vocab=102400, seq=4096, attention="mla", q_lora=1536, kv_lora=512,
                         qk_head_dim=192, v_head_dim=128, experts=160, top_k=6, shared_experts=2, moe_ffn=1536,
                         dense_layers=1)
DEEPSEEK_V3_671B = Model("deepseek-v3-671b", layers=61, hidden=7168, ffn=18432, heads=128, kv_heads=128,
                         head_dim=128, vocab=129280, seq=4096, attention="mla", q_lora=1536, kv_lora=512,
                         qk_head_dim=192, v_head_dim=128, experts=256, top_k=8, shared_experts=1, moe_ffn=2048,
                         dense_layers=3)

PLANS: dict[str, Plan] = {plan.name: plan for plan in [
    Plan("llama3-8b", LLAMA3_8B, Parallel(dp=512), ""),
    Plan("llama3-70b", LLAMA3_70B, Parallel(dp=16, tp=8, pp=4, microbatches=32, schedule="interleaved", chunks=2,
                                            zero=True), ""),
    Plan("llama3-405b", LLAMA3_405B, Parallel(dp=64, tp=8, pp=16, microbatches=16, zero=True),
         "TrainVerify (SOSP'25): ~8 h on 32 cores / 1 TB"),
    Plan("deepseek-moe-16b", DEEPSEEK_MOE_16B, Parallel(dp=16, tp=4, pp=2, ep=4, microbatches=16, zero=True), ""),
    Plan("deepseek-v2-236b", DEEPSEEK_V2_236B, Parallel(dp=16, tp=8, pp=4, ep=8, microbatches=16, zero=True), ""),
    Plan("deepseek-v3-671b", DEEPSEEK_V3_671B, Parallel(dp=32, tp=8, pp=8, ep=8, microbatches=16, zero=True),
         "TrainVerify (SOSP'25): ~9 h"),
]}


# --- the unrolled training program ------------------------------------------------------------

FORWARD_BACKWARD, GRAD_SYNC = "forward+backward", "grad-sync"


@dataclass(frozen=True)
class Segment:
    """One block of the unrolled training step, as an IR program.

    ``program`` runs on ``mesh`` (the dims the block uses); every rank of the plan's mesh
    runs it, ranks that differ only in other dims independently on their own data
    (another sequence, another stage's layers).  It may still read the coordinate of an
    outer dim in a ``when=`` predicate (rank-dependent code); ``symmetry.py`` splits such
    segments into coordinate classes.  ``phase`` says whether it runs once per microbatch
    (forward and backward of a block) or once per step (gradient synchronisation).
    """

    name: str
    kind: str
    program: Program
    phase: str
    stage: int                      # virtual pipeline stage
    layer: int | None = None
    params: tuple[str, ...] = ()    # parameters whose gradients it produces or synchronises

    @property
    def mesh(self) -> Mesh:
        return self.program.mesh


@dataclass(frozen=True)
class TrainingProgram:
    plan: Plan
    fault: Fault = field(default=NO_FAULT)

    def segments(self) -> Iterator[Segment]:
        """Every block in program order (embedding, layers, head), each followed by the
        synchronisation of its parameters' gradients (which runs once per step, after the
        last microbatch).  Generated lazily: one block at a time."""
        plan = self.plan
        yield from self._with_syncs(blocks.embedding(plan), 0, None)
        for stage, layers in enumerate(plan.stage_layers()):
            for layer in layers:
                for block in blocks.layer_blocks(plan, layer, self.fault):
                    yield from self._with_syncs(block, stage, layer)
        yield from self._with_syncs(blocks.head(plan), plan.virtual_stages - 1, None)

    def _with_syncs(self, block: blocks.Block, stage: int, layer: int | None) -> Iterator[Segment]:
        yield Segment(block.name, block.kind, block.program, FORWARD_BACKWARD, stage, layer,
                      tuple(param.path for param in block.params))
        for param in block.params:
            yield Segment(f"{param.path} grad sync", "grad-sync", blocks.grad_sync(self.plan, param, self.fault),
                          GRAD_SYNC, stage, layer, (param.path,))

    def schedule(self) -> Schedule:
        p = self.plan.parallel
        schedule = generate(p.schedule, p.pp, p.microbatches, p.chunks)
        return self.fault.apply_to_schedule(schedule)

    def describe(self) -> dict[str, object]:
        plan = self.plan
        return {"model": plan.model.name, "mesh": str(plan.mesh), "ranks": plan.ranks, "layers": plan.model.layers,
                "virtual_stages": plan.virtual_stages, "microbatches": plan.parallel.microbatches,
                "schedule": plan.parallel.schedule, "zero": plan.parallel.zero}


def pipeline_ops(plan: Plan) -> int:
    """Send and receive ops of the unrolled program: per microbatch and stage boundary, the
    activation forward and its gradient back."""
    return 4 * plan.parallel.microbatches * (plan.virtual_stages - 1)


def accumulation_ops(plan: Plan, parameters: int) -> int:
    """Adds that accumulate each parameter's gradient over the microbatches."""
    return (plan.parallel.microbatches - 1) * parameters
