"""Llama 4 (``Llama4ForConditionalGeneration``: Scout 17B-16E, Maverick 17B-128E; text-only
``Llama4ForCausalLM`` checkpoints as the ``llama4_text`` row, without the tower): GQA with
chunked local attention on the RoPE layers and full attention on the NoPE layers, MoE with one
shared expert on every ``interleave_moe_layer_step``-th layer (dense MLPs of
``intermediate_size_mlp`` between), untied ``lm_head``, and the Llama 4 vision tower with its
pixel-shuffle adapter and projector.

Sources, vLLM 0.12.0 (read in the wheel):

- ``model_executor/models/llama4.py``: ``Llama4Attention`` (``nope = no_rope_layers[i] == 0``:
  no ``rotary_emb`` and plain ``Attention``; a RoPE layer runs ``ChunkedLocalAttention`` with
  ``attention_chunk_size``; ``qk_norm`` is an ``RMSNorm(head_dim, has_weight=False)``, no
  parameters), ``Llama4DecoderLayer`` (MoE when ``(i + 1) % interleave_moe_layer_step == 0``,
  else ``LlamaMLP(intermediate_size_mlp)``), ``Llama4MoE`` (``router``: ``ReplicatedLinear``,
  no bias, unquantised; ``shared_expert``: ``LlamaMLP(intermediate_size)``; ``SharedFusedMoE``
  of ``num_local_experts`` experts of ``intermediate_size``).
- ``mllama4.py``: ``Llama4ForConditionalGeneration.__init__`` builds ``Llama4VisionModel`` and
  ``Llama4MultiModalProjector`` with ``quant_config=None`` on every rank (when the image limit
  is not 0): ``Llama4UnfoldConvolution`` (``ColumnParallelLinear(C·P², H)``, no bias),
  ``class_embedding`` [H], ``positional_embedding_vlm`` [(S/P)² + 1, H], ``layernorm_pre`` /
  ``layernorm_post``; per encoder layer ``QKVParallelLinear`` and ``RowParallelLinear``
  ``o_proj`` with biases, ``Llama4VisionMLP`` fc1 (column) / fc2 (row) with biases, two
  ``nn.LayerNorm``; ``vision_adapter`` (``Llama4VisionPixelShuffleMLP``: fc1
  ``intermediate_size → projector_input_dim``, fc2 ``projector_input_dim →
  projector_output_dim``, biases per ``multi_modal_projector_bias``); projector ``linear_1``
  (``ColumnParallelLinear(vision_output_dim, text hidden)``, no bias). Default
  ``mm_encoder_tp_mode`` shards them by TP.
- Fields a checkpoint leaves out take transformers 4.51 ``Llama4TextConfig``'s defaults:
  ``no_rope_layers`` empty → ``[int((i + 1) % no_rope_layer_interval != 0)]`` with interval 4
  (every 4th layer NoPE), ``interleave_moe_layer_step`` 1, ``attention_chunk_size`` 8192,
  ``head_dim`` 128.

The wrapper goes through the one vision mechanism (``vision_tower`` returns its
``VisionTower``; ``memprof/core/models/multimodal.py``), read in vLLM 0.11.0 ``mllama4.py``:
``Mllama4ProcessingInfo.get_patch_per_chunk`` (``(image_size // patch_size)² // round(1 /
pixel_shuffle_ratio²)`` = 144 tokens a tile), ``get_image_size_with_most_features``
(``max_patches`` tiles high, one wide: ``patches_per_image`` = 1 + 16 tiles),
``_process_image_input`` (the projector's outputs, text hidden wide, are what the encoder cache
holds); the tower and projector are left out when the image limit is 0 (0.10.1+:
``multimodal.TOWER_SKIPPED``). ``Llama4VisionAttention.forward`` keeps the residual, the
normed input, qkv and the rotated q and k, which ``Llama4VisionRotaryEmbedding`` computes as
float32 complex products (``attn_width`` (2, 11): 3 + 4 + 4 H/tp), no all-gather.

Not modelled: the vision encoder's own 2-D rotary buffer (``Llama4VisionRotaryEmbedding``, a
few hundred KiB).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.row import (
    Built,
    EngineTower,
    Family,
    gqa,
    lift_text_config,
    lora_refused,
    sglang_embed_rows,
    sglang_fa3_listed,
    top_k,
    vision_int,
)
from memprof.core.models.spec import MLP, Layer
from memprof.core.versions import Rule, around_snapshots

if TYPE_CHECKING:
    from memprof.core.models.multimodal import VisionTower

# transformers 4.51 Llama4TextConfig.__init__ defaults for what memprof reads
NO_ROPE_LAYER_INTERVAL = 4
LLAMA4_DEFAULTS: dict[str, Any] = {
    "interleave_moe_layer_step": 1, "attention_chunk_size": 8192, "head_dim": 128,
    "no_rope_layer_interval": NO_ROPE_LAYER_INTERVAL,
}


def _view(cfg: dict[str, Any]) -> dict[str, Any]:
    out = lift_text_config(cfg)
    for key, value in LLAMA4_DEFAULTS.items():
        if out.get(key) is None:
            out[key] = value
    if not out.get("no_rope_layers"):  # HF fills an empty list from the interval
        n, every = out.get("num_hidden_layers"), out.get("no_rope_layer_interval")
        if isinstance(n, int) and isinstance(every, int) and every > 0:
            out["no_rope_layers"] = [int((i + 1) % every != 0) for i in range(n)]
    return out


def _llama4_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    nope = c.cfg.get("no_rope_layers")
    if (not isinstance(nope, list) or len(nope) < n_layers
            or any(x not in (0, 1) or isinstance(x, bool) for x in nope[:n_layers])):
        raise ConfigError("config.json no_rope_layers must list 0 or 1 for each of the "
                          f"{n_layers} layers", hint="fix no_rope_layers in the config.json")
    chunk = c.size("attention_chunk_size")
    step = c.size("interleave_moe_layer_step")
    base = gqa(c, hidden, bias=c.flag("attention_bias", False), qk_norm=False)
    rope_attn = replace(base, chunk_size=chunk)
    nope_attn = replace(base, rope="none")
    n_exp = c.size("num_local_experts")
    inter = c.size("intermediate_size")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=inter, shared_intermediate_size=inter)
    dense = MLP(kind="dense", intermediate_size=c.size("intermediate_size_mlp"))
    layers = [Layer(index=i, attention=nope_attn if nope[i] == 0 else rope_attn,
                    mlp=moe if (i + 1) % step == 0 else dense) for i in range(n_layers)]
    return layers, []


# the largest image's tiles: HF Llama4ImageProcessorFast max_patches 16 (the checkpoints'
# preprocessor_config.json), laid out 16:1 by vLLM mllama4.py get_image_size_with_most_features,
# plus the global tile (patches_per_image = 1 + r_h·r_w)
MAX_TILES = 16


def vision_tower(raw: dict[str, Any], text_hidden: int) -> VisionTower:
    """The Llama 4 vision tower, adapter and projector as vLLM builds them on each rank
    (unquantised, TP-sharded; module docstring), and the tokens an image becomes: the largest
    image is ``16 + 1`` tiles of ``(S/P)² · pixel_shuffle_ratio²`` = 144 tokens each (a class
    token a tile dropped after the encoder), projected to the text hidden size; its placeholder
    adds ``<|image_start|>``, a ``<|tile_y_separator|>`` per tile row, ``<|image|>`` and
    ``<|image_end|>`` (HF processing_llama4.py ``_prompt_split_image``): 19 tokens."""
    from memprof.core.models.multimodal import HeadPart, TowerNames, VisionTower

    vc = raw.get("vision_config")
    if not isinstance(vc, dict):
        raise ConfigError("config.json of this Llama 4 model has no vision_config",
                          hint="pass the model's full config.json")
    h, inter = vision_int(vc, "hidden_size"), vision_int(vc, "intermediate_size")
    n_layers, heads = vision_int(vc, "num_hidden_layers"), vision_int(vc, "num_attention_heads")
    patch, image = vision_int(vc, "patch_size"), vision_int(vc, "image_size")
    channels = vision_int(vc, "num_channels", default=3)  # Llama4VisionConfig's default
    d_in, d_out = vision_int(vc, "projector_input_dim"), vision_int(vc, "projector_output_dim")
    d_vis = vision_int(vc, "vision_output_dim")
    mm_bias = bool(vc.get("multi_modal_projector_bias", False))
    ratio = vc.get("pixel_shuffle_ratio", 0.5)  # Llama4VisionConfig's default
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ConfigError(f"vision_config.pixel_shuffle_ratio {str(ratio)[:20]!r} is not in "
                          "(0, 1]", hint="fix vision_config.pixel_shuffle_ratio")
    merge = round(1 / ratio)  # mllama4.py get_patch_per_chunk: ds_ratio = round(1 / ratio²)
    side = image // patch
    if side % merge:
        raise ConfigError(f"pixel_shuffle_ratio {ratio} does not divide the {side}×{side} "
                          "patches of a tile", hint="fix vision_config.pixel_shuffle_ratio")
    p = "vision_model."
    a = p + "vision_adapter.mlp."
    return VisionTower(
        depth=n_layers, hidden=h, intermediate=inter, heads=heads, in_channels=channels,
        patch=patch, merge=merge, out_hidden=text_hidden, gated=False, norm_bias=True,
        patch_shard="col", position_embeddings=side * side + 1, class_embedding=True,
        outer_norms=("layernorm_pre", "layernorm_post"),
        head=(HeadPart(module=a + "fc1", out=d_in, inn=inter, shard="col", bias=mm_bias),
              HeadPart(module=a + "fc2", out=d_out, inn=d_in, shard="row", bias=mm_bias),
              HeadPart(module="multi_modal_projector.linear_1", out=text_hidden, inn=d_vis,
                       shard="col", data_shard="col", group="mm projector")),
        names=TowerNames(prefix=p, patch="patch_embedding.linear",
                         position="positional_embedding_vlm", block="model.layers.{i}.",
                         norm1="input_layernorm", norm2="post_attention_layernorm",
                         qkv="self_attn.qkv_proj", proj="self_attn.o_proj", up="mlp.fc1",
                         down="mlp.fc2"),
        tiles=MAX_TILES + 1, tile_tokens=side * side // (merge * merge),
        placeholder_extra=MAX_TILES + 3, attn_width=(2, 11), gather_qkv=False,
        modalities=("image",), source="vLLM 0.11.0 mllama4.py")


# How SGLang builds Llama 4's vision tower (python/sglang/srt/models/mllama4.py and
# sglang/srt/configs/model_config.py, read in the PyPI wheels). Llama 4 is multimodal by default
# at no release: 0.4.5 lists it only as a TODO in multimodal_model_archs, from 0.4.6
# ModelConfig.__init__ puts Llama4ForConditionalGeneration in mm_disabled_models
# (enable_multimodal False unless --enable-multimodal).
LLAMA4_SGLANG = (
    Rule(name="sglang_vision_tower (llama4)", changes="weights: vision tower", since=None,
         until="0.4.5", value=EngineTower(build="absent", multimodal=False), engine="sglang",
         applies_to="llama4", introduced_by="before 0.4.3 (the oldest release modelled)",
         removed_by="read in the sglang 0.4.5 wheel (first with models/mllama4.py)",
         source="sglang 0.4.3 / 0.4.4 wheels: no models/mllama4.py"),
    Rule(name="sglang_vision_tower (llama4)", changes="weights: vision tower", since="0.4.5",
         until="0.4.6", value=EngineTower(build="skipped", multimodal=False), engine="sglang",
         applies_to="llama4", introduced_by="read in the sglang 0.4.5 wheel",
         removed_by="read in the sglang 0.4.6 wheel (the tower built)",
         source="sglang 0.4.5 models/mllama4.py Llama4ForConditionalGeneration: __init__ "
         "builds language_model only, load_weights skips names starting with vision_model / "
         "multi_modal_projector"),
    Rule(name="sglang_vision_tower (llama4)", changes="weights: vision tower", since="0.4.6",
         until="0.4.9.post5", value=EngineTower(build="whole", multimodal=False),
         engine="sglang", applies_to="llama4", introduced_by="read in the sglang 0.4.6 wheel",
         removed_by="read in the sglang 0.4.9.post5 wheel (built only with "
         "--enable-multimodal)",
         source="sglang 0.4.6 / 0.4.7 / 0.4.8 / 0.4.9 models/mllama4.py __init__: "
         "self.vision_model = Llama4VisionModel(config.vision_config) and "
         "Llama4MultiModalProjector(config), transformers' modules (nn.Linear), always"),
    *around_snapshots(Rule(
         name="sglang_vision_tower (llama4)", changes="weights: vision tower",
         since="0.4.9.post5", until=None,
         value=EngineTower(build="flag", multimodal=False), engine="sglang",
         applies_to="llama4", introduced_by="read in the sglang 0.4.9.post5 wheel",
         source="sglang 0.4.9.post5 / 0.5.1 / 0.5.5 models/mllama4.py __init__: has_vision = "
         "has_vision_weights and enable_multimodal; vision_model / multi_modal_projector None "
         "otherwise")),
)

# SGLang models/llama4.py Llama4Model (the language model of both architectures): embed_tokens
# under DP attention
_SGLANG_EMBED = (
    (None, "0.5.9", "replicated",
     "0.4.6, 0.4.8, 0.4.9, 0.4.9.post5, 0.4.10, 0.5.3, 0.5.4, 0.5.6, 0.5.7, 0.5.8"),
    ("0.5.9", None, "attention_tp", "0.5.9"),
)
TEXT = Family(
    name="llama4_text", model_types=("llama4_text",), architectures=("Llama4ForCausalLM",),
    build=_llama4_layers, attention="gqa", moe=True, config_view=_view,
    dp_attention_embed=sglang_embed_rows("llama4_text", "llama4.py", _SGLANG_EMBED),
    source="vLLM model_executor/models/llama4.py Llama4ForCausalLM (0.12.0)",
)
# vLLM's LoRA support of Llama4ForConditionalGeneration (mllama4.py): SupportsLoRA from 0.11.1
# (0.8.5 / 0.10.2 / 0.11.0 have none), where FusedMoEWithLoRA puts LoRA on the experts too:
# refused until memprof models it
LORA = lora_refused("llama4", "Llama4ForConditionalGeneration", "0.11.1",
                    "0.8.5 / 0.10.2 / 0.11.0 (no SupportsLoRA) / 0.11.1 / 0.12.0 / 0.33.0 "
                    "mllama4.py", introduced_by="SupportsLoRA on Llama4ForConditionalGeneration "
                    "(first released in 0.11.1)", experts_from="0.11.1")

FAMILY = Family(
    lora=LORA,
    name="llama4", model_types=("llama4",),
    architectures=("Llama4ForConditionalGeneration",),
    sglang_fa3_listed=(sglang_fa3_listed("llama4", "0.4.6", "0.5.8",
                                         ("Llama4ForConditionalGeneration",)),),
    build=_llama4_layers, attention="gqa", moe=True, config_view=_view, vision=vision_tower,
    dp_attention_embed=sglang_embed_rows("llama4", "llama4.py", _SGLANG_EMBED),
    sglang_tower=LLAMA4_SGLANG,
    source="vLLM model_executor/models/llama4.py + mllama4.py (0.12.0)",
)
