"""Gemma 4 (``Gemma4ForConditionalGeneration``, model_type ``gemma4``; its language model
``Gemma4ForCausalLM``, ``gemma4_text``): interleaved sliding-window and global layers with their
own head sizes, KV heads and RoPE bases, a dense MLP in every layer and, in the MoE checkpoints
(``enable_moe_block``), 128 routed experts beside it; tied embeddings; a vision tower that is
transformers' own model.

Sources: vLLM 0.19.0 (the first release with the architecture: 0.18.0 has no ``gemma4*.py``)
and 0.33.0 (the newest read), ``model_executor/models/gemma4.py`` and ``gemma4_mm.py``, the same
layout in both:

- ``Gemma4DecoderLayer.__init__``: a ``full_attention`` layer (``layer_types``) takes
  ``global_head_dim`` as its head size and, with ``attention_k_eq_v``,
  ``num_global_key_value_heads`` KV heads; a ``sliding_attention`` layer ``head_dim`` and
  ``num_key_value_heads``, with ``sliding_window`` (``Gemma4Attention``:
  ``per_layer_sliding_window``).
- ``Gemma4Attention``: one ``QKVParallelLinear(hidden, head_dim, heads, kv_heads)`` for every
  layer, k_eq_v ones too ("K weights are loaded into both K and V slots": the V slot is
  allocated and filled although the checkpoint has no ``v_proj`` there, and the KV cache holds
  K and V); row-parallel ``o_proj``; ``q_norm`` / ``k_norm`` (``RMSNorm(head_dim)``) and a
  weightless ``v_norm``; ``get_rope`` with the layer type's ``rope_parameters`` entry
  (``rope_theta`` of ``sliding_attention`` / ``full_attention``): two RoPE caches a rank.
  ``layers/rotary_embedding/gemma4_rope.py`` (``proportional``) passes ``rotary_dim = head_size``
  whatever ``partial_rotary_factor`` says, so the global layers' cache is ``head_size`` wide.
- ``Gemma4MLP`` (``MergedColumnParallelLinear`` gate_up, row-parallel down, ``gelu_pytorch_tanh``
  only) in every layer; with ``enable_moe_block`` a ``Gemma4Router`` (``GateLinear`` hidden →
  ``num_experts`` replicated, a ``scale`` vector of hidden) and ``Gemma4MoE`` (``FusedMoE`` of
  ``num_experts`` × ``moe_intermediate_size``, ``top_k_experts``, gelu) in parallel with it:
  memprof's MoE MLP with the dense MLP as its always-on shared expert (the same tensors, split
  the same way over TP).
- Norms: ``input_layernorm``, ``post_attention_layernorm``, ``pre_feedforward_layernorm``,
  ``post_feedforward_layernorm`` (hidden) in every layer.
- ``Gemma4ForCausalLM``: ``ParallelLMHead`` tied to ``embed_tokens`` when
  ``tie_word_embeddings``.
- ``num_kv_shared_layers`` (the last layers reading an earlier layer's KV cache,
  ``kv_sharing_target_layer_name``), per-layer input embeddings (``hidden_size_per_layer_input``:
  ``embed_tokens_per_layer``, ``per_layer_model_projection``) and ``use_double_wide_mlp`` are the
  small E2B / E4B checkpoints' layout: refused here, not modelled.
- ``gemma4_mm.py`` ``Gemma4ForConditionalGeneration.__init__``: the vision tower is
  ``AutoModel.from_config(config.vision_config)`` (transformers' ``Gemma4VisionModel``: plain
  ``nn.Linear`` layers, no TP split, no quantisation) and ``Gemma4MultimodalEmbedder``
  (``ReplicatedLinear`` vision hidden → text hidden, a weightless norm), both inside
  ``_mark_tower_model(vllm_config, {"image", "video"})`` (left out when both limits are 0:
  ``multimodal.TOWER_SKIPPED``); an ``audio_config`` adds an audio tower, refused here.
  ``Gemma4ProcessingInfo._compute_num_soft_tokens``: an image is at most
  ``vision_config.default_output_length`` (280) soft tokens, each the average of
  ``pooling_kernel_size``² (3 × 3) patches of ``patch_size`` 16.
- ``model_executor/models/config.py`` ``Gemma4Config.verify_and_update_config`` picks the
  attention backend itself when the layers' head sizes differ: 0.19.0 forces ``TRITON_ATTN``
  (the larger head exceeds 256 and no ``--attention-backend`` is given); 0.33.0 uses
  FlashAttention 4 where it is available (per-layer FA3/FA4 with an fp8 KV cache on SM90) and
  ``TRITON_ATTN`` otherwise. memprof charges the default backend's scratch: the estimate's note
  says so.

What the weights leave out (each < 0.01% of 26B-A4B's): the MoE block's three extra norms and
router ``scale`` (4 × hidden a layer), ``per_expert_scale`` (``num_experts``) and the
``layer_scalar`` buffer; in the vision tower the two extra block norms and the q/k norms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families.gemma import sglang_bf16_for_fp32
from memprof.core.models.families.row import (
    Built,
    Family,
    layer_types_windows,
    lift_text_config,
    missing,
    top_k,
    vision_int,
)
from memprof.core.models.spec import MLP, Attention, Layer

if TYPE_CHECKING:
    from memprof.core.models.multimodal import VisionTower

SOURCE_RELEASES = "vLLM 0.19.0 and 0.33.0"


def _view(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's config (``text_config`` lifted: ``lift_text_config``)."""
    return lift_text_config(cfg)


def _refuse_small_layouts(c: ConfigFields) -> None:
    """The E2B / E4B layout (shared KV layers, per-layer inputs, audio) is not modelled."""
    shared = c.cfg.get("num_kv_shared_layers") or 0
    ple = c.cfg.get("hidden_size_per_layer_input") or 0
    if shared or ple or c.cfg.get("audio_config"):
        what = ("num_kv_shared_layers" if shared else
                "hidden_size_per_layer_input" if ple else "audio_config")
        raise ConfigError(
            f"this Gemma 4 config sets {what}: the small checkpoints' layout (layers sharing an "
            "earlier layer's KV cache, per-layer input embeddings, an audio tower) is not "
            "modelled by memprof",
            hint="memprof models the Gemma 4 checkpoints without them (26B-A4B, 31B)")


def _rope_theta(c: ConfigFields, layer_type: str) -> float:
    params = c.cfg.get("rope_parameters")
    entry = params.get(layer_type) if isinstance(params, dict) else None
    theta = entry.get("rope_theta") if isinstance(entry, dict) else None
    if not isinstance(theta, (int, float)) or isinstance(theta, bool) or theta <= 0:
        raise missing(c, f"rope_parameters.{layer_type}.rope_theta", f"the {layer_type} "
                      "layers' RoPE base")
    return float(theta)


def _attention(c: ConfigFields, *, full: bool, window: int | None) -> Attention:
    heads = c.size("num_attention_heads")
    if full:
        hd = c.size("global_head_dim") if c.cfg.get("global_head_dim") else c.size("head_dim")
        kv = (c.size("num_global_key_value_heads") if c.flag("attention_k_eq_v", False)
              and c.cfg.get("num_global_key_value_heads") is not None
              else c.size("num_key_value_heads"))
    else:
        hd, kv = c.size("head_dim"), c.size("num_key_value_heads")
    if heads % kv:
        raise ConfigError(f"num_attention_heads {heads} is not a multiple of the "
                          f"{'global' if full else 'sliding'} layers' {kv} KV heads",
                          hint="fix the config.json")
    bias = c.flag("attention_bias", False)
    theta = _rope_theta(c, "full_attention" if full else "sliding_attention")
    return Attention(kind="gqa", num_heads=heads, num_kv_heads=kv, head_dim=hd, v_head_dim=hd,
                     qkv_bias=bias, o_bias=bias, qk_norm=True, sliding_window=window,
                     rope="plain", rope_theta=theta)


def _mlp(c: ConfigFields) -> MLP:
    act = str(c.cfg.get("hidden_activation") or "gelu_pytorch_tanh")
    if act != "gelu_pytorch_tanh":
        raise ConfigError(f"Gemma 4 hidden_activation {act[:40]!r}: vLLM's Gemma4MLP accepts "
                          "gelu_pytorch_tanh only", hint="fix hidden_activation in the config")
    inter = c.size("intermediate_size")
    if not c.flag("enable_moe_block", False):
        return MLP(kind="dense", intermediate_size=inter, activation=act)
    experts = c.size("num_experts")
    key = "moe_intermediate_size" if c.cfg.get("moe_intermediate_size") is not None \
        else "expert_intermediate_size"
    if c.cfg.get(key) is None:
        raise missing(c, "moe_intermediate_size", "the routed experts' size")
    return MLP(kind="moe", num_experts=experts, top_k=top_k(c, experts, "top_k_experts"),
               moe_intermediate_size=c.size(key), shared_intermediate_size=inter,
               activation=act)


def _layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    _refuse_small_layouts(c)
    windows = layer_types_windows(c, n_layers)
    if windows is None:
        raise missing(c, "layer_types", "which layers are sliding and which global")
    sliding = next((w for w in windows if w), None)
    full = _attention(c, full=True, window=None)
    local = _attention(c, full=False, window=sliding) if sliding else full
    mlp = _mlp(c)
    layers = [Layer(index=i, attention=local if windows[i] else full, mlp=mlp)
              for i in range(n_layers)]
    return layers, []


def vision_tower(raw: dict[str, Any], text_hidden: int) -> VisionTower | None:
    """transformers' ``Gemma4VisionModel`` and vLLM's ``embed_vision`` as vLLM builds them
    (module docstring): per block q/k/v/o ``nn.Linear`` without bias, a gated MLP without bias,
    RMSNorms; the patch embedder (``input_proj`` of ``3·patch²`` inputs, no bias) and its
    ``position_embedding_table`` [2, position_embedding_size, hidden]; all whole on every rank.
    An image is ``default_output_length`` tokens of ``pooling_kernel_size``² patches, framed by
    its begin/end-of-image tokens. The encoder forward's live widths are taken as Gemma 3's
    SigLIP tower's (no N² score matrix: transformers' attention kernel for this tower is not
    read). None for a config without ``vision_config``."""
    from memprof.core.models.multimodal import HeadPart, TowerNames, VisionTower

    vc = raw.get("vision_config")
    if vc is None:
        return None
    if not isinstance(vc, dict):
        raise ConfigError("config.json field 'vision_config' must be an object",
                          hint="fix vision_config in the config.json")
    h, inter = vision_int(vc, "hidden_size"), vision_int(vc, "intermediate_size")
    depth, heads = vision_int(vc, "num_hidden_layers"), vision_int(vc, "num_attention_heads")
    patch, pool = vision_int(vc, "patch_size"), vision_int(vc, "pooling_kernel_size")
    positions = vision_int(vc, "position_embedding_size")
    tokens = vision_int(vc, "default_output_length")
    return VisionTower(
        depth=depth, hidden=h, intermediate=inter, heads=heads, in_channels=3, patch=patch,
        merge=pool, out_hidden=text_hidden, gated=True, norm_bias=False, proj_bias=False,
        mlp_bias=False, qkv_bias=False, patch_bias=False, patch_shard="rep", quantised=False,
        position_embeddings=2 * positions, position_shard="rep", whole=True,
        head=(HeadPart(module="embed_vision.embedding_projection", out=text_hidden, inn=h,
                       group="mm projector"),),
        names=TowerNames(prefix="vision_tower.", patch="patch_embedder.input_proj",
                         position="patch_embedder.position_embedding_table",
                         block="encoder.layers.{i}.", norm1="input_layernorm",
                         norm2="pre_feedforward_layernorm", qkv="self_attn.qkv",
                         proj="self_attn.o_proj", up="mlp.gate_up_proj",
                         down="mlp.down_proj"),
        tiles=1, tile_tokens=tokens, placeholder_extra=2, attn_width=(2, 4), gather_qkv=False,
        data_mode=False, modalities=("image", "video"),
        source="vLLM 0.19.0 gemma4_mm.py + transformers Gemma4VisionModel")


SGLANG_AUTO_DTYPE = (sglang_bf16_for_fp32("gemma4", "gemma4", "0.4.5"),)

FAMILY = Family(
    name="gemma4", model_types=("gemma4", "gemma4_text"),
    architectures=("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"),
    build=_layers, attention="gqa", moe=True, config_view=_view,
    layer_norms=("pre_feedforward_layernorm", "post_feedforward_layernorm"),
    vision=vision_tower,
    sglang_auto_dtype=SGLANG_AUTO_DTYPE, release_rules=lambda: (SGLANG_AUTO_DTYPE,),
    note="vLLM picks its own attention backend for Gemma 4's 512-wide global heads "
         "(model_executor/models/config.py Gemma4Config: TRITON_ATTN in 0.19.0; FA4 where "
         "available, else TRITON_ATTN, in 0.33.0); memprof charges the default backend's "
         "scratch",
    source=f"{SOURCE_RELEASES} model_executor/models/gemma4.py + gemma4_mm.py",
)
