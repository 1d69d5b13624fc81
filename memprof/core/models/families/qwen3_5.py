"""Qwen3.5 / Qwen3.6 (``Qwen3_5ForConditionalGeneration``, ``model_type`` ``qwen3_5``: the dense
27B; ``Qwen3_5MoeForConditionalGeneration``, ``qwen3_5_moe``: the 35B-A3B, 122B-A10B, 397B-A17B):
Qwen3-Next's hybrid language model (Gated DeltaNet in three layers of four, gated full attention
in every fourth) inside a Qwen3-VL-style vision-language wrapper.

Sources (vLLM wheels read: 0.16.0 has no Qwen3.5; 0.17.0 is the first release with
``vllm/model_executor/models/qwen3_5.py``; 0.18.0 and 0.33.0 build the same modules):

- ``qwen3_5.py`` ``Qwen3_5DecoderLayer``: ``linear_attn`` (``Qwen3_5GatedDeltaNet``, a
  ``Qwen3NextGatedDeltaNet`` whose ``in_proj_qkvz`` is a ``MergedColumnParallelLinear`` of
  ``[key, key, value, value]`` and ``in_proj_ba`` of ``[v_heads, v_heads]`` — the same sizes
  as Qwen3-Next's, loaded from the checkpoint's separate ``in_proj_qkv``/``in_proj_z``/
  ``in_proj_b``/``in_proj_a``; 0.33.0 ``QwenGatedDeltaNetAttention``, same tensors) or
  ``self_attn`` (``Qwen3NextAttention``: q doubled by the output gate, q/k norms) by
  ``config.layer_types[layer_idx]``. Where it differs from Qwen3-Next: the MLP is chosen by
  the text config's ``model_type``, not by ``decoder_sparse_step`` / ``mlp_only_layers`` —
  ``qwen3_5_moe_text``: ``Qwen3NextSparseMoeBlock`` (router, experts, shared expert and its
  one-output gate) in **every** layer; ``qwen3_5_text``: a dense ``Qwen2MoeMLP`` of
  ``intermediate_size`` in every layer.
- ``Qwen3_5ForCausalLMBase``: ``lm_head`` is ``embed_tokens`` when the text config's
  ``tie_word_embeddings`` (vLLM's ``Qwen3_5TextConfig`` default False,
  ``transformers_utils/configs/qwen3_5.py`` 0.17.0), else a ``ParallelLMHead``.
- MTP: the checkpoints carry one MTP layer (``mtp_num_hidden_layers``), but
  ``Qwen3_5ForConditionalGeneration.load_weights`` skips ``mtp.*`` (0.17.0 / 0.18.0
  ``skip_prefixes=["mtp."]``; 0.33.0 ``hf_to_vllm_mapper`` maps ``mtp.`` to None): the
  main model loads none of it. With ``--speculative-config`` method ``mtp`` (or
  ``qwen3_5_mtp``; config/speculative.py ``hf_config_override`` turns model type ``qwen3_5`` /
  ``qwen3_5_moe`` into ``qwen3_5_mtp``, architecture ``Qwen3_5MTP`` / ``Qwen3_5MoeMTP``,
  ``n_predict`` = ``mtp_num_hidden_layers``) vLLM builds the drafter of ``qwen3_5_mtp.py``
  (present from 0.17.0, the first Qwen3.5 release; read in 0.17.0 and 0.33.0):
  ``Qwen3_5MultiTokenPredictor`` holds ``mtp_num_hidden_layers`` ``Qwen3_5DecoderLayer``s built with
  ``layer_type="full_attention"`` (gated full attention, never a Gated DeltaNet layer) and the
  target's MLP (the config's ``model_type`` chooses it: the MoE block for
  ``Qwen3_5MoeMTP``, the dense MLP otherwise), one ``fc`` (``ColumnParallelLinear(2H, H)``
  over [embedding, hidden], quantised with the checkpoint's config: the FP8 checkpoints list
  ``mtp.fc`` in ``modules_to_not_convert``; 0.33.0 also leaves it unquantised for
  ``modelopt_fp4``) and three RMSNorms (``pre_fc_norm_embedding``, ``pre_fc_norm_hidden``,
  ``norm``). Its ``embed_tokens`` and ``lm_head`` are the target's
  (v1/spec_decode/llm_base_proposer.py ``_maybe_share_embeddings`` / ``_maybe_share_lm_head``,
  "Detected MTP model"; 0.33.0). The layer's attention is a full-attention layer of the KV
  cache like the target's (``mtp_layers``; memprof/core/kvcache.py puts it on the last
  stage).
- Vision: ``self.visual = Qwen3_VisionTransformer(config.vision_config, ...)`` of
  ``qwen3_vl.py`` (LayerNorm blocks, fc1/fc2 MLP, learnt position table, patch merger; the
  checkpoints list no ``deepstack_visual_indexes``), built under ``_mark_tower_model`` for
  image/video; the processing info is ``Qwen3VLProcessingInfo``'s, and the checkpoints'
  processor files state Qwen3-VL's limits (``preprocessor_config.json`` of Qwen/Qwen3.5-2B-Base
  as a public tool log printed it: ``Qwen3VLProcessor``, ``size`` 65536 – 16777216 pixels,
  patch 16, merge 2; a Qwen3.x model's ``video_preprocessor_config.json`` quoted in a public
  write-up: 4096 – 25165824), so the processor rows are Qwen3-VL's
  (``memprof/core/models/families/qwen_vl.py`` ``processors``).
- State dtype: ``model_executor/models/config.py`` ``Qwen3_5ForConditionalGenerationConfig``
  (0.17.0 / 0.18.0 / 0.33.0) sets an "auto" ``mamba_ssm_cache_dtype`` to the config's
  ``mamba_ssm_dtype`` (``float32`` in the checkpoints): the recurrent state is fp32, the conv
  state the model dtype. The builder puts it in ``StateMixer.config_ssm_dtype`` (read while
  ``SSM_DTYPE_FROM_CONFIG`` of ``memprof/core/attention/state.py`` holds, from 0.13.0: every
  release with this model).
- RoPE: the checkpoints state ``partial_rotary_factor`` (0.25) inside ``rope_parameters``,
  where vLLM's ``get_rope`` reads it; the config view lifts it beside ``head_dim``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields
from memprof.core.models.families import qwen_vl
from memprof.core.models.families.row import (
    Built,
    Family,
    gqa,
    lift_text_config,
    linear_full_layer_types,
    lora_refused,
    missing,
    top_k,
)
from memprof.core.models.spec import MLP, Attention, Layer, StateMixer
from memprof.core.versions import Rule

if TYPE_CHECKING:
    from memprof.core.models.multimodal import VisionTower

RELEASES = (Rule(
    name="qwen3_5_model", changes="the model", since="0.17.0", until=None,
    introduced_by="Qwen3.5 support (first in the 0.17.0 wheel; 0.16.0 has no qwen3_5.py)",
    source="vLLM 0.17.0 model_executor/models/qwen3_5.py", applies_to="multimodal"),)

_SSM_DTYPES = ("float16", "bfloat16", "float32")


def _view(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's config as vLLM reads it: ``text_config`` lifted
    (``lift_text_config``); ``tie_word_embeddings`` the text config's own (vLLM's
    ``Qwen3_5TextConfig`` defaults it to False, whatever the wrapper says); and
    ``partial_rotary_factor`` from ``rope_parameters`` where the checkpoint states it only
    there."""
    out = lift_text_config(cfg)
    text = cfg.get("text_config")
    if isinstance(text, dict):
        out["tie_word_embeddings"] = bool(text.get("tie_word_embeddings", False))
    rope = out.get("rope_parameters")
    if out.get("partial_rotary_factor") is None and isinstance(rope, dict):
        prf = rope.get("partial_rotary_factor")
        if prf is not None:
            out["partial_rotary_factor"] = prf
    return out


def _gdn(c: ConfigFields) -> StateMixer:
    for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                "linear_value_head_dim", "linear_conv_kernel_dim"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "it sizes the Gated DeltaNet layers and their state")
    ssm = c.cfg.get("mamba_ssm_dtype")
    if ssm is not None and ssm not in _SSM_DTYPES:
        raise ConfigError(f"mamba_ssm_dtype {str(ssm)[:40]!r} is not known",
                          hint="float16, bfloat16 or float32")
    return StateMixer(kind="gdn", num_heads=c.size("linear_num_value_heads"),
                      num_k_heads=c.size("linear_num_key_heads"),
                      head_k_dim=c.size("linear_key_head_dim"),
                      head_v_dim=c.size("linear_value_head_dim"),
                      conv_kernel=c.size("linear_conv_kernel_dim"),
                      config_ssm_dtype=str(ssm or ""))


def _layers(c: ConfigFields, hidden: int, n_layers: int, mlp: MLP) -> Built:
    attn = replace(gqa(c, hidden, bias=c.flag("attention_bias", False), qk_norm=True,
                       kv_heads_required=True),
                   output_gate=c.flag("attn_output_gate", True))
    linear = replace(attn, mixer=_gdn(c))
    layers = [Layer(index=i, attention=attn if kind == "full_attention" else linear, mlp=mlp)
              for i, kind in enumerate(linear_full_layer_types(c, n_layers))]
    return layers, _mtp_layers(c, n_layers, attn, mlp)


def _mtp_layers(c: ConfigFields, n_layers: int, attn: Attention, mlp: MLP) -> list[Layer]:
    """The MTP drafter's decoder layers (``mtp_num_hidden_layers``, none where the config
    declares none): full attention and the target's MLP (qwen3_5_mtp.py
    ``Qwen3_5MultiTokenPredictor``: ``Qwen3_5DecoderLayer(layer_type="full_attention")``)."""
    return [Layer(index=n_layers + k, attention=attn, mlp=mlp, is_mtp=True)
            for k in range(c.num("mtp_num_hidden_layers", 0))]


def _dense_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """``qwen3_5_text``: a dense MLP of ``intermediate_size`` in every layer."""
    return _layers(c, hidden, n_layers,
                   MLP(kind="dense", intermediate_size=c.size("intermediate_size")))


def _moe_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    """``qwen3_5_moe_text``: ``Qwen3NextSparseMoeBlock`` in every layer."""
    for key in ("num_experts", "moe_intermediate_size", "shared_expert_intermediate_size"):
        if c.cfg.get(key) is None:
            raise missing(c, key, "it sizes the MoE block every layer has")
    n_exp = c.size("num_experts")
    moe = MLP(kind="moe", num_experts=n_exp, top_k=top_k(c, n_exp, "num_experts_per_tok"),
              moe_intermediate_size=c.size("moe_intermediate_size"),
              shared_intermediate_size=c.num("shared_expert_intermediate_size"),
              shared_expert_gate=True)
    return _layers(c, hidden, n_layers, moe)


def _tower(cfg: dict[str, Any], text_hidden: int) -> VisionTower:
    """``Qwen3_VisionTransformer`` from ``vision_config`` (vLLM 0.17.0 qwen3_5.py builds the
    Qwen3-VL tower: ``qwen3_vl.py``)."""
    return qwen_vl.deepstack_tower(
        cfg, text_hidden, RELEASES, "vLLM 0.17.0 qwen3_5.py (qwen3_vl.py Qwen3_VisionTransformer)")


NOTE = ("the checkpoint's MTP layer loads only with --num-speculative-tokens and "
        "--speculative-method mtp (vLLM skips mtp.* weights otherwise)")

# vLLM's LoRA support: Qwen3_5ForConditionalGeneration subclasses Qwen3VLForConditionalGeneration
# (SupportsLoRA) from its first release, with LoRA on the Gated DeltaNet layers' projections
# (packed_modules_mapping in_proj_qkvz / in_proj_ba) and, for the MoE, the experts: refused until
# memprof models them
_LORA_READ = "0.17.0 / 0.20.0 / 0.33.0 qwen3_5.py, qwen3_vl.py"
_LORA_SINCE = "Qwen3.5 support with SupportsLoRA (first released in 0.17.0)"
QWEN3_5_LORA = lora_refused("qwen3_5", "Qwen3_5ForConditionalGeneration", "0.17.0", _LORA_READ,
                            introduced_by=_LORA_SINCE, unmodelled="Gated DeltaNet projections")
QWEN3_5_MOE_LORA = lora_refused("qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", "0.17.0",
                                _LORA_READ, introduced_by=_LORA_SINCE,
                                unmodelled="Gated DeltaNet projections",
                                experts_from="0.17.0")

# Qwen3VLForConditionalGeneration.hf_to_vllm_mapper (qwen3_vl.py, 0.27.1 / 0.33.0), which the
# the MTP drafter's predictor input (Family.mtp_predictor_input), read in the 0.27.0, 0.30.0 and
# 0.33.0 wheels
MTP_INPUT = ("fc", "model_executor/models/qwen3_5_mtp.py Qwen3_5MultiTokenPredictor.forward")
# Qwen3.5 classes inherit: memprof names the language model's modules ``model.*``
_PREFIXES = (("model.visual.", "visual."), ("model.language_model.", "model."))

QWEN3_5 = Family(
    lora=QWEN3_5_LORA,
    name="qwen3_5", model_types=("qwen3_5",), architectures=("Qwen3_5ForConditionalGeneration",),
    build=_dense_layers, attention="gqa", mtp=True, mtp_fc_block=True, vision=_tower,
    mtp_predictor_input=MTP_INPUT,
    config_view=_view,
    weight_prefixes=_PREFIXES,
    release_rules=lambda: (RELEASES,), note=NOTE,
    source="vLLM model_executor/models/qwen3_5.py (0.17.0 / 0.18.0 / 0.33.0)")
QWEN3_5_MOE = Family(
    lora=QWEN3_5_MOE_LORA,
    name="qwen3_5_moe", model_types=("qwen3_5_moe",),
    architectures=("Qwen3_5MoeForConditionalGeneration",), build=_moe_layers, attention="gqa",
    moe=True, mtp=True, mtp_fc_block=True, vision=_tower, config_view=_view,
    mtp_predictor_input=MTP_INPUT,
    weight_prefixes=_PREFIXES, note=NOTE,
    source="vLLM model_executor/models/qwen3_5.py (0.17.0 / 0.18.0 / 0.33.0)")
