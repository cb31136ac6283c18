"""A transformers architecture with its own tensor-parallel plan, built tiny and parallelised the way
transformers does it itself (``from_pretrained(..., tp_plan="auto")``): every parameter of the full
model is cut with ``shard_and_distribute_module`` (the plan's ``shard_tensor`` for its module) and the
plan's hooks are added with ``distribute_model``; on one rank nothing is cut (the reference).

Used by benchmarks/hf_tp_plans.py twice: by its ground truth (gloo ranks) and as the body of the
``--harness`` file the tool is given (the harness only builds the model and its inputs).
"""
from __future__ import annotations

TINY = dict(num_hidden_layers=1, hidden_size=16, intermediate_size=32, moe_intermediate_size=16,
            shared_expert_intermediate_size=16, num_attention_heads=4, num_key_value_heads=4, head_dim=4,
            vocab_size=64, max_position_embeddings=64, num_experts=4, num_local_experts=4, n_routed_experts=4,
            num_experts_per_tok=2, n_shared_experts=1, use_cache=False, first_k_dense_replace=0,
            q_lora_rank=None, kv_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=4,
            qk_head_dim=8, n_group=1, topk_group=1, attention_dropout=0.0, hidden_dropout=0.0,
            partial_rotary_factor=1.0, sliding_window=16, tie_word_embeddings=False)  # a window longer than
# the 8 tokens masks nothing, and the layers that need one (gemma2, qwen2_moe) get one


def plan_architectures() -> list[tuple[str, str]]:
    """(model_type, config class name) of every architecture whose config ships ``base_model_tp_plan``."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    found, seen = [], set()
    for model_type, name in CONFIG_MAPPING_NAMES.items():
        cls = getattr(transformers, name, None)
        if cls is None or not getattr(cls, "base_model_tp_plan", None) or name in seen \
                or getattr(cls, "model_type", model_type) != model_type:   # code_llama is llama's config
            continue
        seen.add(name)
        found.append((model_type, name))
    return found


def model_class(model_type: str):
    import transformers
    from transformers.models.auto import modeling_auto as ma

    name = ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) or ma.MODEL_MAPPING_NAMES.get(model_type)
    return getattr(transformers, name, None) if name else None   # None: not exported (voxtral_realtime_text)


def tiny_config(config_name: str):
    import transformers

    cls = getattr(transformers, config_name)
    config = cls()
    for key, value in TINY.items():
        if hasattr(config, key):
            setattr(config, key, value)
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list) and layer_types:
        config.layer_types = layer_types[:1]
    for key in ("mlp_only_layers",):
        if hasattr(config, key):
            setattr(config, key, [])
    if hasattr(config, "rope_parameters") and isinstance(config.rope_parameters, dict):
        config.rope_parameters = {**config.rope_parameters, "partial_rotary_factor": 1.0}
    if isinstance(getattr(config, "pad_token_id", None), int) and config.pad_token_id >= config.vocab_size:
        config.pad_token_id = None   # the embedding's padding row must lie in the tiny vocabulary
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"   # torch's grouped_mm takes no float64
    return config


def build(model_type: str, config_name: str, world: int):
    """(model, inputs): the tiny model, sharded by its plan on ``world`` ranks, and its token ids."""
    import torch
    import torch.distributed as dist

    torch.manual_seed(0)
    config = tiny_config(config_name)
    model = model_class(model_type)(config).to(torch.float64)
    model.eval()   # no dropout; gradients still flow
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from transformers.integrations.tensor_parallel import ALL_PARALLEL_STYLES, _get_parameter_tp_plan, distribute_model

        mesh = init_device_mesh("cpu", (world,))
        rank = dist.get_rank()
        # as shard_and_distribute_module does while loading, with the CPU as the device (it passes the
        # rank as a device index, which needs an accelerator)
        for name, param in list(model.named_parameters()):
            plan = _get_parameter_tp_plan(name, model.tp_plan)
            if plan is None:
                continue
            layer = ALL_PARALLEL_STYLES[plan]
            layer.empty_param, layer.device_mesh, layer.rank = param, mesh, rank
            piece = layer.shard_tensor(_Slice(param.detach()), tensor_idx=None, dtype=param.dtype,
                                       device="cpu").contiguous()
            owner, _, attr = name.rpartition(".")
            setattr(model.get_submodule(owner), attr, torch.nn.Parameter(piece, requires_grad=param.requires_grad))
        distribute_model(model, None, None, mesh, world)
    torch.manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (1, 8))
    return model, (ids,)


PACKED = {"packed_colwise": -2, "packed_rowwise": -1}   # the dim get_packed_weights cuts


def state_packed_layouts(model) -> None:
    """For the ground truth only: a packed gate/up weight's rank piece is ``[gate_r; up_r]`` (two blocks
    cut alike), not one contiguous slice, so its gradient pieces are re-assembled as a block-strided
    layout (Megatron's ``partition_stride=2`` spelling, which the ground truth reads); joined end to end
    they would be compared with the wrong rows."""
    from transformers.integrations.tensor_parallel import _get_parameter_tp_plan

    for name, param in model.named_parameters():
        dim = PACKED.get(_get_parameter_tp_plan(name, model.tp_plan) or "")
        if dim is not None and param.dim() >= 2:
            param.tensor_model_parallel, param.partition_dim, param.partition_stride = True, param.dim() + dim, 2


class _Slice:
    """A tensor as a checkpoint's lazy slice looks to ``shard_tensor`` while loading (packed gate/up
    weights read ``get_dtype``; the others index it or ask its ``get_shape``)."""

    def __init__(self, tensor) -> None:
        import torch

        self.tensor = tensor
        self.names = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}

    def get_dtype(self) -> str:
        return self.names[self.tensor.dtype]

    def get_shape(self) -> list[int]:
        return list(self.tensor.shape)

    def dim(self) -> int:
        return self.tensor.dim()

    @property
    def shape(self):
        return self.tensor.shape

    def __getitem__(self, index):
        return self.tensor[index]


def logits_of(model):
    """The model called on token ids, its logits (the output the comparison is about)."""
    def call(ids):
        out = model(input_ids=ids)
        return out.logits if hasattr(out, "logits") else out.last_hidden_state
    return call
