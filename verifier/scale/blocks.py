"""IR programs for the blocks of a training plan, and the stand-ins for gradient synchronisation.

Every block is one layer's sub-block as it runs on one tensor-parallel group (and, for
the routed experts, one expert-parallel x tensor-parallel group), forward plus the
gradients of its input and of its parameters, with the tensor-parallel gradient
synchronisation the block needs in its ``backward`` section.  Boundaries are the
sequence-parallel residual stream ``[S, H]`` placed ``S(0)`` over ``tp``: the contract
the cut-point argument composes over.  Sizes are symbolic dims bound to the model's
real sizes (``S=8192, H=16384``), so the checker proves divisibility at the real sizes
and runs the equivalence proof on reduced ones.

Gradient synchronisation over the data-parallel dims (``dp``, and ``ep`` for parameters
replicated over it) is checked per parameter on a *stand-in*: a per-token loss that is
linear in the parameter and in arbitrary token features, normalised as the plan's head
normalises the loss (token mean per microbatch, divided by the number of microbatches),
with the tokens split over the data-parallel ranks as the plan splits them, and — for
expert weights — reaching the experts through the same ``all_to_all`` dispatch and
combine.  Its ``backward`` section is the plan's real synchronisation of that gradient
(all-reduce or ZeRO reduce-scatter, the expert scaling), checked at the real
data-parallel sizes against the gradient of the global mean loss.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..ir import Mesh, Program, eval_dim
from ..placements import Shard
from .builder import ProgramBuilder

if TYPE_CHECKING:
    from .faults import Fault
    from .plans import Plan

RESIDUAL = {"tp": "S(0)"}   # the sequence-parallel residual stream between blocks
ATTENTION, MLP, MOE_ROUTER, MOE_EXPERTS, EMBEDDING, HEAD = (
    "attention", "mlp", "moe-router", "moe-experts", "embedding", "head")


@dataclass(frozen=True)
class Param:
    """A parameter of a block, for its gradient synchronisation."""

    path: str        # "layers.5.attention.wq"
    value: str       # its input name in the block program
    expert: bool     # sharded over ep by expert; replicated over dp and tp
    numel: int       # elements per rank (per expert for expert weights), at the real sizes
    experts: int = 0


@dataclass(frozen=True)
class Block:
    name: str        # "layers.5.mlp"
    kind: str
    program: Program
    params: tuple[Param, ...]


def _tp_mesh(plan: "Plan") -> Mesh:
    return Mesh((("tp", plan.parallel.tp),))


def _finish(builder: ProgramBuilder, name: str, kind: str, params: dict[str, str], experts: tuple[str, ...] = ()
            ) -> Block:
    """Build the program and describe its parameters (``params``: local name -> value)."""
    program = builder.build()
    specs = {spec.name: spec for spec in program.inputs}
    described = []
    for local, value in params.items():
        spec = specs[value]
        shape = [int(eval_dim(d, builder.dims)) for d in spec.shape]
        shards = 1
        for (mesh_dim, size), placement in zip(program.mesh.dims, spec.placements):
            if isinstance(placement, Shard) and not (local in experts and mesh_dim == "ep"):
                shards *= size
        if local in experts:
            described.append(Param(f"{name}.{local}", value, True, math.prod(shape[1:]) // shards, shape[0]))
        else:
            described.append(Param(f"{name}.{local}", value, False, math.prod(shape) // shards))
    return Block(name, kind, program, tuple(described))


# --- transformer blocks ---------------------------------------------------------------------

def attention(plan: "Plan", layer: int) -> Block:
    m = plan.model
    if m.attention == "mla":
        return _mla(plan, layer)
    dims = {"S": m.seq, "H": m.hidden, "NH": m.heads, "NKV": m.kv_heads, "D": m.head_dim}
    b = ProgramBuilder(_tp_mesh(plan), dims, f"l{layer}_")
    x = b.input("x", ["S", "H"], RESIDUAL)
    g1 = b.input("g1", ["H"])
    wq = b.input("wq", ["H", "NH*D"], {"tp": "S(1)"})
    # multi-head attention (as many kv heads as query heads) has one head count: with two symbols
    # the reduced sizes could give them different extents, and k's reshape to NH heads would fail
    kv = "NKV" if m.heads != m.kv_heads else "NH"
    wk = b.input("wk", ["H", f"{kv}*D"], {"tp": "S(1)"})
    wv = b.input("wv", ["H", f"{kv}*D"], {"tp": "S(1)"})
    wo = b.input("wo", ["NH*D", "H"], {"tp": "S(0)"})
    n = b.op("n1", "rms_norm", x, g1)
    full = b.op("n1_full", "all_gather", n, mesh_dim="tp", dim=0)
    q0 = b.op("q0", "matmul", full, wq)
    k0 = b.op("k0", "matmul", full, wk)
    v0 = b.op("v0", "matmul", full, wv)
    if m.heads != m.kv_heads:  # grouped-query attention: each kv head serves NH/NKV query heads
        q1 = b.op("q1", "reshape", q0, shape=["S", "NKV/tp_size", "NH/NKV", "D"])
        q = b.op("q", "permute", q1, dims=[1, 2, 0, 3])
        repeat = b.op("kv_repeat", "ones", shape=[1, "NH/NKV", 1, 1])
        heads = []
        for tag, value in (("k", k0), ("v", v0)):
            grouped = b.op(f"{tag}1", "reshape", value, shape=["S", "NKV/tp_size", 1, "D"])
            moved = b.op(f"{tag}2", "permute", grouped, dims=[1, 2, 0, 3])
            heads.append(b.op(tag, "mul", moved, repeat))
        c = b.op("ctx", "sdpa", q, heads[0], heads[1], causal=True)
        c1 = b.op("ctx1", "permute", c, dims=[2, 0, 1, 3])
    else:
        per_head = []
        for tag, value in (("q", q0), ("k", k0), ("v", v0)):
            split = b.op(f"{tag}1", "reshape", value, shape=["S", "NH/tp_size", "D"])
            per_head.append(b.op(tag, "transpose", split, dim0=0, dim1=1))
        c = b.op("ctx", "sdpa", *per_head, causal=True)
        c1 = b.op("ctx1", "transpose", c, dim0=0, dim1=1)
    c2 = b.op("ctx2", "reshape", c1, shape=["S", "NH*D/tp_size"])
    o = b.op("o", "matmul", c2, wo)
    o_r = b.op("o_rs", "reduce_scatter", o, mesh_dim="tp", dim=0, op="sum")
    h = b.op("h", "add", x, o_r)
    b.output(h, RESIDUAL)
    synced = b.sync("g1_sync", "all_reduce", f"grad_{g1}", mesh_dim="tp", op="sum")
    b.grad(x)
    b.grad(g1, synced, {})
    for w in (wq, wk, wv, wo):
        b.grad(w)
    return _finish(b, f"layers.{layer}.attention", ATTENTION, {"norm": g1, "wq": wq, "wk": wk, "wv": wv, "wo": wo})


def _mla(plan: "Plan", layer: int) -> Block:
    """Multi-head latent attention: low-rank query and key/value compression (down-projections
    replicated over tp, computed on the local sequence shard, normalised), per-head
    up-projections column-parallel, output projection row-parallel."""
    m = plan.model
    dims = {"S": m.seq, "H": m.hidden, "NH": m.heads, "QR": m.q_lora, "KR": m.kv_lora, "DQ": m.qk_head_dim,
            "DV": m.v_head_dim}
    b = ProgramBuilder(_tp_mesh(plan), dims, f"l{layer}_")
    x = b.input("x", ["S", "H"], RESIDUAL)
    g1 = b.input("g1", ["H"])
    wdq = b.input("wdq", ["H", "QR"])
    gq = b.input("gq", ["QR"])
    wuq = b.input("wuq", ["QR", "NH*DQ"], {"tp": "S(1)"})
    wdkv = b.input("wdkv", ["H", "KR"])
    gkv = b.input("gkv", ["KR"])
    wuk = b.input("wuk", ["KR", "NH*DQ"], {"tp": "S(1)"})
    wuv = b.input("wuv", ["KR", "NH*DV"], {"tp": "S(1)"})
    wo = b.input("wo", ["NH*DV", "H"], {"tp": "S(0)"})
    n = b.op("n1", "rms_norm", x, g1)
    cq = b.op("cq", "rms_norm", b.op("cq0", "matmul", n, wdq), gq)
    ckv = b.op("ckv", "rms_norm", b.op("ckv0", "matmul", n, wdkv), gkv)
    cq_full = b.op("cq_full", "all_gather", cq, mesh_dim="tp", dim=0)
    ckv_full = b.op("ckv_full", "all_gather", ckv, mesh_dim="tp", dim=0)
    heads = []
    for tag, latent, weight, width in (("q", cq_full, wuq, "DQ"), ("k", ckv_full, wuk, "DQ"),
                                       ("v", ckv_full, wuv, "DV")):
        up = b.op(f"{tag}0", "matmul", latent, weight)
        split = b.op(f"{tag}1", "reshape", up, shape=["S", "NH/tp_size", width])
        heads.append(b.op(tag, "transpose", split, dim0=0, dim1=1))
    c = b.op("ctx", "sdpa", *heads, causal=True)
    c1 = b.op("ctx1", "transpose", c, dim0=0, dim1=1)
    c2 = b.op("ctx2", "reshape", c1, shape=["S", "NH*DV/tp_size"])
    o = b.op("o", "matmul", c2, wo)
    o_r = b.op("o_rs", "reduce_scatter", o, mesh_dim="tp", dim=0, op="sum")
    h = b.op("h", "add", x, o_r)
    b.output(h, RESIDUAL)
    b.grad(x)
    for w in (g1, wdq, gq, wdkv, gkv):  # replicated over tp, applied to sequence shards
        b.grad(w, b.sync(f"{w[len(b.prefix):]}_sync", "all_reduce", f"grad_{w}", mesh_dim="tp", op="sum"), {})
    for w in (wuq, wuk, wuv, wo):
        b.grad(w)
    return _finish(b, f"layers.{layer}.attention", ATTENTION,
                   {"norm": g1, "wdq": wdq, "q_norm": gq, "wuq": wuq, "wdkv": wdkv, "kv_norm": gkv, "wuk": wuk,
                    "wuv": wuv, "wo": wo})


def _swiglu(b: ProgramBuilder, tokens: str, w_gate: str, w_up: str, w_down: str, tag: str, guard: str | None) -> str:
    """Column-parallel gate/up, SiLU, row-parallel down, reduce-scatter back to the sequence
    shards.  ``guard``: the seeded fault's ``when=`` for the reduction ("" drops it)."""
    full = b.op(f"{tag}_in", "all_gather", tokens, mesh_dim="tp", dim=0)
    gate = b.op(f"{tag}_gate", "matmul", full, w_gate)
    up = b.op(f"{tag}_up", "matmul", full, w_up)
    act = b.op(f"{tag}_act", "mul", b.op(f"{tag}_silu", "silu", gate), up)
    down = b.op(f"{tag}_down", "matmul", act, w_down)
    if guard == "":
        return down
    attrs = {"when": guard} if guard else {}
    return b.op(f"{tag}_rs", "reduce_scatter", down, mesh_dim="tp", dim=0, op="sum", **attrs)


def mlp(plan: "Plan", layer: int, fault: "Fault") -> Block:
    m = plan.model
    b = ProgramBuilder(_tp_mesh(plan), {"S": m.seq, "H": m.hidden, "F": m.ffn}, f"l{layer}_")
    h = b.input("h", ["S", "H"], RESIDUAL)
    g2 = b.input("g2", ["H"])
    wg = b.input("wg", ["H", "F"], {"tp": "S(1)"})
    wu = b.input("wu", ["H", "F"], {"tp": "S(1)"})
    wd = b.input("wd", ["F", "H"], {"tp": "S(0)"})
    n = b.op("n2", "rms_norm", h, g2)
    out = b.op("out", "add", h, _swiglu(b, n, wg, wu, wd, "mlp", fault.reduction_guard(layer)))
    b.output(out, RESIDUAL)
    b.grad(h)
    b.grad(g2, b.sync("g2_sync", "all_reduce", f"grad_{g2}", mesh_dim="tp", op="sum"), {})
    for w in (wg, wu, wd):
        b.grad(w)
    return _finish(b, f"layers.{layer}.mlp", MLP, {"norm": g2, "wg": wg, "wu": wu, "wd": wd})


def moe_router(plan: "Plan", layer: int, fault: "Fault") -> Block:
    """Norm, router gate and shared experts of a MoE layer, on one tensor-parallel group.
    Outputs the residual, the normalised tokens, the gate and the shared experts' output,
    all on the sequence shards: the inputs of the routed experts."""
    m = plan.model
    dims = {"S": m.seq, "H": m.hidden, "E": m.experts, "FS": m.moe_ffn * max(m.shared_experts, 1)}
    b = ProgramBuilder(_tp_mesh(plan), dims, f"l{layer}_")
    h = b.input("h", ["S", "H"], RESIDUAL)
    g2 = b.input("g2", ["H"])
    wr = b.input("wr", ["H", "E"])
    ws1 = b.input("ws1", ["H", "FS"], {"tp": "S(1)"})
    ws3 = b.input("ws3", ["H", "FS"], {"tp": "S(1)"})
    ws2 = b.input("ws2", ["FS", "H"], {"tp": "S(0)"})
    n = b.op("n2", "rms_norm", h, g2)
    gate = b.op("gate", "softmax", b.op("logits", "matmul", n, wr), dim=-1)
    shared = _swiglu(b, n, ws1, ws3, ws2, "shared", fault.reduction_guard(layer))
    residual = b.op("res", "identity", h)
    for value in (residual, n, gate, shared):
        b.output(value, RESIDUAL)
    b.grad(h)
    b.grad(g2, b.sync("g2_sync", "all_reduce", f"grad_{g2}", mesh_dim="tp", op="sum"), {})
    b.grad(wr, b.sync("wr_sync", "all_reduce", f"grad_{wr}", mesh_dim="tp", op="sum"), {})
    for w in (ws1, ws3, ws2):
        b.grad(w)
    return _finish(b, f"layers.{layer}.moe_router", MOE_ROUTER,
                   {"norm": g2, "router": wr, "shared_w1": ws1, "shared_w3": ws3, "shared_w2": ws2})


def moe_experts(plan: "Plan", layer: int) -> Block:
    """Routed experts on one ``ep x tp`` group: the tokens of the ``ep`` replicas' sequences
    (``T = ep * S``, each rank holding its sequence shard), dispatched to every expert,
    computed where the expert lives, combined back and weighted by the gate."""
    m = plan.model
    p = plan.parallel
    mesh = Mesh((("ep", p.ep), ("tp", p.tp)))
    tokens = {"ep": "S(0)", "tp": "S(0)"}
    dims = {"T": m.seq * p.ep, "H": m.hidden, "E": m.experts, "FE": m.moe_ffn}
    b = ProgramBuilder(mesh, dims, f"l{layer}_")
    res = b.input("res", ["T", "H"], tokens)
    n = b.input("n2", ["T", "H"], tokens)
    gate = b.input("gate", ["T", "E"], tokens)
    shared = b.input("shared", ["T", "H"], tokens)
    w1 = b.input("we1", ["E", "H", "FE"], {"ep": "S(0)"})
    w3 = b.input("we3", ["E", "H", "FE"], {"ep": "S(0)"})
    w2 = b.input("we2", ["E", "FE", "H"], {"ep": "S(0)"})
    rows = b.op("rows", "reshape", n, shape=[1, -1, "H"])
    fan = b.op("fan", "ones", shape=["E", 1, 1])
    dispatch = b.op("dispatch", "mul", rows, fan)
    arrived = b.op("arrived", "all_to_all", dispatch, mesh_dim="ep", split_dim=0, concat_dim=1)
    e1 = b.op("e1", "matmul", arrived, w1)
    e3 = b.op("e3", "matmul", arrived, w3)
    act = b.op("e_act", "mul", b.op("e_silu", "silu", e1), e3)
    done = b.op("e_out", "matmul", act, w2)
    back = b.op("combined", "all_to_all", done, mesh_dim="ep", split_dim=1, concat_dim=0)
    weights = b.op("gate_w", "reshape", b.op("gate_t", "transpose", gate, dim0=0, dim1=1), shape=["E", -1, 1])
    routed = b.op("routed", "sum", b.op("weighted", "mul", back, weights), dim=0)
    out = b.op("out", "add", res, b.op("mix", "add", routed, shared))
    b.output(out, tokens)
    for value in (res, n, gate, shared):
        b.grad(value)
    for w in (w1, w3, w2):  # each tp rank saw only its sequence shards: sum over tp
        b.grad(w, b.sync(f"{w[len(b.prefix):]}_sync", "all_reduce", f"grad_{w}", mesh_dim="tp", op="sum"),
               {"ep": "S(0)"})
    return _finish(b, f"layers.{layer}.moe_experts", MOE_EXPERTS, {"w1": w1, "w3": w3, "w2": w2},
                   experts=("w1", "w3", "w2"))


def layer_blocks(plan: "Plan", layer: int, fault: "Fault") -> list[Block]:
    if plan.model.layer_kind(layer) == "moe":
        return [attention(plan, layer), moe_router(plan, layer, fault), moe_experts(plan, layer)]
    return [attention(plan, layer), mlp(plan, layer, fault)]


def embedding(plan: "Plan") -> Block:
    """Vocab-parallel embedding, then each rank keeps its sequence shard."""
    m = plan.model
    b = ProgramBuilder(_tp_mesh(plan), {"S": m.seq, "H": m.hidden, "V": m.vocab}, "emb_",
                       (f"S % {plan.parallel.tp} == 0",))  # each rank keeps an equal sequence shard
    ids = b.input("ids", ["S"], dtype="i64", bounds=(0, "V"))
    table = b.input("table", ["V", "H"], {"tp": "S(0)"})
    e = b.op("e", "vocab_parallel_embedding", ids, table, mesh_dim="tp")
    x = b.op("x", "local_chunk", e, mesh_dim="tp", dim=0, grad="all_gather")
    b.output(x, RESIDUAL)
    b.grad(table)
    return _finish(b, "embedding", EMBEDDING, {"table": table})


def head(plan: "Plan") -> Block:
    """Final norm, column-parallel output layer, vocab-parallel cross entropy (token mean),
    divided by the number of microbatches (gradients accumulate over them)."""
    m = plan.model
    dims = {"S": m.seq, "H": m.hidden, "V": m.vocab, "M": plan.parallel.microbatches}
    b = ProgramBuilder(_tp_mesh(plan), dims, "head_")
    x = b.input("x", ["S", "H"], RESIDUAL)
    gf = b.input("norm", ["H"])
    w = b.input("wout", ["H", "V"], {"tp": "S(1)"})
    target = b.input("target", ["S"], dtype="i64", bounds=(0, "V"))
    n = b.op("n", "rms_norm", x, gf)
    full = b.op("n_full", "all_gather", n, mesh_dim="tp", dim=0)
    logits = b.op("logits", "matmul", full, w)
    loss = b.op("ce", "vocab_parallel_cross_entropy", logits, target, mesh_dim="tp", reduction="mean")
    scaled = b.op("loss", "div", loss, scalar="M")
    b.output(scaled, {})
    b.grad(x)
    b.grad(gf, b.sync("norm_sync", "all_reduce", f"grad_{gf}", mesh_dim="tp", op="sum"), {})
    b.grad(w)
    return _finish(b, "head", HEAD, {"norm": gf, "wout": w})


# --- data-parallel gradient synchronisation -------------------------------------------------

def data_parallel_mesh(plan: "Plan", expert: bool) -> Mesh:
    """The mesh dims over which a gradient is synchronised: the data-parallel replicas."""
    dims = [("dp", plan.parallel.dp_replicas)]
    if plan.model.is_moe:
        dims.append(("ep", plan.parallel.ep))
    return Mesh(tuple(dims))


def grad_sync(plan: "Plan", param: Param, fault: "Fault") -> Program:
    """The stand-in for ``param`` (module docstring) with the plan's synchronisation of its gradient."""
    p = plan.parallel
    moe = plan.model.is_moe
    mesh = data_parallel_mesh(plan, param.expert)
    dims = {"M": p.microbatches, "T": plan.model.seq * p.dp, "K": param.numel}
    tokens = {"dp": "S(1)", "ep": "S(1)"} if moe else {"dp": "S(1)"}
    replicas = {"dp": "P(avg)", "ep": "P(avg)"} if moe else {"dp": "P(avg)"}
    if param.expert:
        dims["E"] = param.experts
    requires = (f"K % {p.dp_replicas} == 0",) if p.zero else ()  # ZeRO: each replica owns an equal shard
    b = ProgramBuilder(mesh, dims, "", requires)
    features = b.input("features", ["M", "T", "K"], tokens)
    if param.expert:
        w = b.input("weight", ["E", "K"], {"ep": "S(0)"})
        rows = b.op("rows", "reshape", features, shape=["M", 1, -1, "K"])
        dispatch = b.op("dispatch", "mul", rows, b.op("fan", "ones", shape=[1, "E", 1, 1]))
        arrived = b.op("arrived", "all_to_all", dispatch, mesh_dim="ep", split_dim=1, concat_dim=2)
        local = b.op("expert_w", "reshape", w, shape=[1, -1, 1, "K"])
        done = b.op("expert_out", "mul", arrived, local)
        back = b.op("combined", "all_to_all", done, mesh_dim="ep", split_dim=2, concat_dim=1)
        per_token = b.op("token_loss", "sum", back, dim=[1, 3])
    else:
        w = b.input("weight", ["K"])
        per_token = b.op("token_loss", "sum", b.op("contrib", "mul", features, w), dim=2)
    per_microbatch = b.op("mb_loss", "mean", per_token, dim=1)
    loss = b.op("loss", "div", b.op("total", "sum", per_microbatch), scalar="M")
    b.output(loss, replicas)
    grad = f"grad_{w}"
    shard_dim = 1 if param.expert else 0
    placements: dict[str, str] = {}
    if moe and not param.expert:  # replicated over ep as well: average over it first
        grad = b.sync("ep_avg", "all_reduce", grad, mesh_dim="ep", op="avg")
    if p.zero:
        grad = b.sync("dp_shard", "reduce_scatter", grad, mesh_dim="dp", dim=shard_dim, op="avg")
        placements["dp"] = f"S({shard_dim})"
    else:
        grad = b.sync("dp_avg", "all_reduce", grad, mesh_dim="dp", op="avg")
    if param.expert:  # each expert's gradient summed the losses of all ep replicas
        grad = b.sync("ep_scaled", "div", grad, b.sync("ep_world", "world_size", mesh_dim="ep"))
        placements["ep"] = "S(0)"
    if fault.divides_twice(param.path):
        grad = b.sync("averaged_again", "div", grad, b.sync("dp_world", "world_size", mesh_dim="dp"))
    b.grad(w, grad, placements)
    return b.build()
