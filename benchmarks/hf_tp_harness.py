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
            kv_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=4,
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


def model_class(model_type: str, config_name: str | None = None):
    """The causal LM of ``model_type`` (else its image-text-to-text model, else its base model) whose
    config class is ``config_name``: llama4's causal LM takes the text config, the plan is on the whole
    model's.  None: transformers exports none (voxtral_realtime_text)."""
    import transformers
    from transformers.models.auto import modeling_auto as ma

    for mapping in (ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
                    ma.MODEL_MAPPING_NAMES):
        cls = getattr(transformers, mapping.get(model_type) or "", None)
        if cls is not None and (config_name is None or getattr(cls.config_class, "__name__", None) == config_name):
            return cls
    return None


# Size fields the TINY table does not name, matched by what their names say they are (linear-attention
# heads, an indexer's heads, per-layer input vocabularies, an expert FFN, a layer count spelled
# num_layers, a vision tower's projector, a top-k of experts): each shrinks to the tiny value of its kind, never grows, never turns None.
SHRINK = ((r"(^|_)num_(hidden_)?(layers|blocks)$", 1), (r"vocab_size", 64), (r"head_dim$", 4),
          (r"(^|_)n(um)?(_\w+)?_heads$", 4), (r"(hidden|intermediate|ffn)(_\w+)?_size", 16), (r"_rank$", 8),
          (r"expert_num$", 4), (r"channels?$", 16), (r"_(input|output)_dim$", 16), (r"moe_topk$", 2),
          (r"max_distance$", 16))


def _shrink(config) -> None:
    import re

    for key, value in list(config.to_dict().items()):
        if key in TINY or isinstance(value, bool) or not isinstance(value, int) or not hasattr(config, key):
            continue
        tiny = next((v for pattern, v in SHRINK if re.search(pattern, key)), None)
        if tiny is not None and value > tiny:
            setattr(config, key, tiny)
    patch = getattr(config, "patch_size", None)
    for key in ("image_size", "crop_size"):   # a vision tower: two patches a side
        if isinstance(patch, int) and isinstance(getattr(config, key, None), int) and config.to_dict()[key] > 2 * patch:
            setattr(config, key, 2 * patch)


def _mrope_sections(config) -> None:
    """A multimodal rotary embedding splits head_dim/2 frequencies into (temporal, height, width)
    sections; the class's sections (or an even split where it names none) are scaled to the tiny head
    by largest remainder.  Token ids alone give the three position grids the same values."""
    rope = getattr(config, "rope_parameters", None)
    if not isinstance(rope, dict):
        return
    half = (getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads) // 2
    given = rope.get("mrope_section") or [1, 1, 1]
    exact = [half * x / sum(given) for x in given]
    parts = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: parts[i] - exact[i])[: half - sum(parts)]:
        parts[i] += 1
    config.rope_parameters = {**rope, "mrope_section": parts}


def _reads_mrope(config) -> bool:
    import importlib
    import inspect

    try:
        module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    except ImportError:
        return False
    return "mrope_section" in inspect.getsource(module)


def tiny_config(config_name: str):
    import transformers

    cls = getattr(transformers, config_name)
    config = cls()
    return _tiny(config)


def _tiny(config):
    for sub in getattr(config, "sub_configs", None) or {}:   # a composite's text, vision, audio parts
        if getattr(config, sub, None) is not None:
            setattr(config, sub, _tiny(getattr(config, sub)))
    layers = getattr(config, "num_hidden_layers", None)
    for key, value in TINY.items():
        if hasattr(config, key):
            old = getattr(config, key)   # a per-layer list (gemma3n's intermediate_size) stays one
            setattr(config, key, [value] * TINY["num_hidden_layers"] if isinstance(old, list) else value)
    for key, value in list(vars(config).items()):   # other per-layer lists keep their first layers
        if isinstance(value, list) and layers and len(value) == layers and key != "layer_types":
            setattr(config, key, value[: TINY["num_hidden_layers"]])
    _shrink(config)
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list) and layer_types:
        config.layer_types = layer_types[:1]
    for key in ("mlp_only_layers",):
        if hasattr(config, key):
            setattr(config, key, [])
    if hasattr(config, "rope_parameters") and isinstance(config.rope_parameters, dict):
        config.rope_parameters = {**config.rope_parameters, "partial_rotary_factor": 1.0}
        if _reads_mrope(config):
            _mrope_sections(config)
    if getattr(config, "num_kv_shared_layers", 0):   # layers sharing an earlier layer's keys: none of 1
        config.num_kv_shared_layers = 0
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
    model = model_class(model_type, config_name)(config).to(torch.float64)
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
    vocab = getattr(config, "vocab_size", None) or config.get_text_config().vocab_size   # llama4: its text part's
    ids = torch.randint(0, vocab, (1, 8))
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
