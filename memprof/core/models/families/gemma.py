"""Gemma 2 (``Gemma2ForCausalLM``) and Gemma 3 (``Gemma3ForCausalLM`` text,
``Gemma3ForConditionalGeneration`` with its SigLIP vision tower): dense GQA decoders with
interleaved sliding-window and global layers, four RMSNorms a layer, tied embeddings, and (Gemma
3) q/k norms and a second RoPE base for the sliding layers.

Sources, vLLM 0.12.0 (read in the wheel; the same layout in 0.9.2–0.14.1):

- ``model_executor/models/gemma2.py``: ``Gemma2Attention`` (``QKVParallelLinear`` without bias
  unless ``attention_bias``, row-parallel ``o_proj``, one ``get_rope`` with ``rope_theta``;
  ``sliding_window`` on layers whose ``layer_types`` entry is ``sliding_attention``),
  ``Gemma2MLP`` (``MergedColumnParallelLinear`` gate_up, row-parallel down, ``gelu_pytorch_tanh``),
  ``Gemma2DecoderLayer`` (``input_layernorm``, ``post_attention_layernorm``,
  ``pre_feedforward_layernorm``, ``post_feedforward_layernorm``, each ``GemmaRMSNorm(hidden)``),
  ``Gemma2ForCausalLM`` (``assert config.tie_word_embeddings``: the logits use ``embed_tokens``,
  no ``lm_head``).
- ``gemma3.py``: the same layer plus ``q_norm`` / ``k_norm`` (``GemmaRMSNorm(head_dim)``);
  ``Gemma3Attention.__init__`` gives a sliding layer ``rope_type default`` on
  ``rope_local_base_freq`` and a global layer the config's ``rope_theta`` / ``rope_scaling``, so
  a rank keeps two RoPE caches (``memprof.core.attention.gqa.GQA.rope_caches``).
- ``gemma3_mm.py``: ``Gemma3ForConditionalGeneration.__init__`` builds ``SiglipVisionModel``
  (``siglip.py``: ``Conv2dLayer`` patch embedding with bias, ``VocabParallelEmbedding``
  positions, per layer ``QKVParallelLinear`` / ``RowParallelLinear`` ``out_proj`` /
  ``ColumnParallelLinear`` ``fc1`` / ``RowParallelLinear`` ``fc2``, all with biases, two
  ``nn.LayerNorm``; ``post_layernorm``; no head when ``vision_use_head`` is false) and
  ``Gemma3MultiModalProjector`` (``mm_input_projection_weight`` [vision hidden, text hidden],
  ``mm_soft_emb_norm``) on every rank, before the language model; ``SiglipMLP`` quantises
  fc1/fc2 only when hidden and intermediate sizes are multiples of 64.
- Layer types when the config states none: HF ``Gemma2Config`` alternates (``(i + 1) % 2`` →
  sliding: layer 0 sliding, vLLM ≤ 0.9 ``not bool(layer_idx % 2)``); ``Gemma3TextConfig`` makes
  every ``sliding_window_pattern``-th layer global (``(i + 1) % pattern`` → sliding; vLLM 0.8
  ``gemma3.py`` ``is_sliding = bool((layer_idx + 1) % config.sliding_window_pattern)``).
- Fields a checkpoint leaves out take the HF config class's defaults (transformers 4.50
  ``configuration_gemma2.py`` / ``configuration_gemma3.py``, as vLLM reads them through
  ``AutoConfig``): ``GEMMA2_DEFAULTS`` / ``GEMMA3_DEFAULTS`` below.

Soft-capping (``attn_logit_softcapping``, ``final_logit_softcapping``) holds no memory of its
own: the attention cap is a kernel argument, and ``LogitsProcessor`` (``logits_processor.py``)
caps the ``[rows, vocab]`` logits in the model dtype out of place, each step freeing the
previous tensor, below the sampler's fp32 copy of the same rows that sets the profile-run peak.

The multimodal wrapper goes through the one vision mechanism (``siglip_tower`` returns its
``VisionTower``; ``memprof/core/models/multimodal.py``): vLLM 0.11.0 ``gemma3_mm.py``
``Gemma3ProcessingInfo.get_num_image_tokens`` gives an image ``(num_crops + 1) ×
image_seq_length`` tokens, ``num_crops`` 0 with pan-and-scan off (``get_num_crops``), so the
largest image is 256 tokens; ``Gemma3MultiModalProjector`` average-pools the ``64 × 64`` SigLIP
patches with a kernel of ``patches_per_image // tokens_per_side`` = 4 and projects them to the
text hidden size (what the encoder cache holds). ``SiglipAttention.forward`` (``siglip.py``)
keeps the residual, the normed input, qkv and the attention output live (``attn_width``
(2, 4)); ``SiglipMLP`` fc1 and its activation. The tower is built whatever
``--limit-mm-per-prompt`` says up to 0.14.1 (``GEMMA3_MM_TOWER_SKIPPED``), and
``--mm-encoder-tp-mode`` is not read by ``gemma3_mm.py`` (refused).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memprof.base.errors import ConfigError
from memprof.core.models.config import ROPE_KEEPS_MAX_LEN, ConfigFields
from memprof.core.models.families.row import (
    Built,
    ConfigView,
    EngineTower,
    Family,
    LoraSupport,
    gqa,
    layer_types_windows,
    lift_text_config,
    missing,
    sglang_fa3_listed,
    v0_gate_up_rows,
    vision_int,
)
from memprof.core.models.spec import MLP, Layer
from memprof.core.versions import Rule, around_snapshots

if TYPE_CHECKING:
    from memprof.core.models.multimodal import VisionTower

# transformers 4.50 Gemma2Config.__init__ defaults for the fields memprof reads
GEMMA2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 256_000, "max_position_embeddings": 8192, "head_dim": 256,
    "rope_theta": 10_000.0, "sliding_window": 4096, "tie_word_embeddings": True,
}
# transformers 4.50 Gemma3TextConfig.__init__ defaults (google/gemma-3-27b-it's text_config
# states only what differs from them; google/gemma-3-4b-it's states neither head count: 8 query
# and 4 KV heads are these defaults)
GEMMA3_DEFAULTS: dict[str, Any] = {
    "num_attention_heads": 8, "num_key_value_heads": 4,
    "vocab_size": 262_208, "max_position_embeddings": 131_072, "head_dim": 256,
    "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0, "sliding_window": 4096,
    "sliding_window_pattern": 6, "tie_word_embeddings": True,
}


def _view(defaults: dict[str, Any], *, rope_keeps_max_len: bool = False) -> ConfigView:
    """The config as the family reads it: the text config lifted (``lift_text_config``), the
    HF config class's ``defaults`` where the checkpoint states none; Gemma 3 marked as vLLM's
    ``_get_and_verify_max_len`` treats it (no rope factor on the derived context length)."""
    def view(cfg: dict[str, Any]) -> dict[str, Any]:
        out = lift_text_config(cfg)
        for key, value in defaults.items():
            if out.get(key) is None:
                out[key] = value
        if rope_keeps_max_len:
            out[ROPE_KEEPS_MAX_LEN] = True
        return out
    return view


def _windows(c: ConfigFields, n_layers: int, *, gemma3: bool) -> list[int | None]:
    """Per-layer windows: ``layer_types`` when stated, else the HF config class's pattern."""
    out = layer_types_windows(c, n_layers)
    if out is not None:
        return out
    window = c.size("sliding_window")
    if gemma3:
        pattern = c.size("sliding_window_pattern")
        return [window if (i + 1) % pattern else None for i in range(n_layers)]
    return [window if (i + 1) % 2 else None for i in range(n_layers)]


def _mlp(c: ConfigFields) -> MLP:
    act = c.cfg.get("hidden_activation") or c.cfg.get("hidden_act") or "gelu_pytorch_tanh"
    return MLP(kind="dense", intermediate_size=c.size("intermediate_size"), activation=str(act))


def _gemma2_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    windows = _windows(c, n_layers, gemma3=False)
    bias = c.flag("attention_bias", False)
    attn = {w: gqa(c, hidden, bias=bias, qk_norm=False, window=w) for w in set(windows)}
    mlp = _mlp(c)
    return [Layer(index=i, attention=attn[windows[i]], mlp=mlp) for i in range(n_layers)], []


def _gemma3_layers(c: ConfigFields, hidden: int, n_layers: int) -> Built:
    windows = _windows(c, n_layers, gemma3=True)
    bias = c.flag("attention_bias", False)
    local = c.cfg.get("rope_local_base_freq")
    if not isinstance(local, (int, float)) or isinstance(local, bool) or local <= 0:
        raise missing(c, "rope_local_base_freq", "the sliding layers' RoPE base")
    attn = {}
    for w in set(windows):
        a = gqa(c, hidden, bias=bias, qk_norm=True, window=w)
        attn[w] = replace(a, rope="plain", rope_theta=float(local)) if w else a
    mlp = _mlp(c)
    return [Layer(index=i, attention=attn[windows[i]], mlp=mlp) for i in range(n_layers)], []


# When vLLM leaves the SigLIP tower out: gemma3_mm.py builds it whatever the limits up to
# 0.14.1; from 0.15.0 through SupportsMultiModal._mark_tower_model (every limit 0), and from
# 0.33.0 on the PP stages after the first too (the shared rows, multimodal.TOWER_SKIPPED)
GEMMA3_MM_TOWER_SKIPPED: tuple[Rule, ...] = (
    Rule(name="gemma3_mm_tower_skipped", changes="weights: vision tower", since="0.15.0",
         until="0.33.0", value=("no modality",),
         introduced_by="first seen in 0.15.1 (0.14.1 builds the tower whatever the limits)",
         removed_by="0.33.0 adds the PP case",
         source="0.15.1 / 0.19.0 models/gemma3_mm.py __init__: with "
         "self._mark_tower_model(vllm_config, 'image'); models/interfaces.py",
         applies_to="gemma3_mm"),
    Rule(name="gemma3_mm_tower_skipped", changes="weights: vision tower", since="0.33.0",
         until=None, value=("no modality", "later stages"), introduced_by="first seen in 0.33.0",
         source="0.33.0 models/gemma3_mm.py, models/interfaces.py _mark_tower_model",
         applies_to="gemma3_mm"),
)
# the image's placeholder beyond its 256 embeddings: HF processing_gemma3.py
# full_image_sequence = "\n\n" + boi + image tokens + eoi + "\n\n", tokenised as
# [108, 255999, soft tokens…, 256000, 108] (Google's gemma library, gemma/gm/vision
# _token_utils tests): 4 tokens, counted by the 0.11.0 - 0.12.0 encoder budget (ENCODER_PROFILE)
PLACEHOLDER_EXTRA = 4


def siglip_tower(raw: dict[str, Any], text_hidden: int) -> VisionTower | None:
    """The SigLIP vision tower and Gemma 3's projector as vLLM builds them on each rank (module
    docstring), and the tokens an image becomes: one 896² image (pan-and-scan off, the
    processor's default) of ``(S/P)²`` = 4096 patches, average-pooled to
    ``mm_tokens_per_image`` = 256 tokens of the text hidden size. None for a text-only
    ``Gemma3ForCausalLM`` config that names model_type gemma3."""
    from memprof.core.models.multimodal import HeadPart, TowerNames, VisionTower

    vc = raw.get("vision_config")
    if vc is None and "Gemma3ForConditionalGeneration" not in (raw.get("architectures") or []):
        return None
    if not isinstance(vc, dict):
        raise ConfigError("config.json of this Gemma 3 model has no vision_config",
                          hint="pass the model's full config.json (or the text model's)")
    h, inter = vision_int(vc, "hidden_size"), vision_int(vc, "intermediate_size")
    n_layers, heads = vision_int(vc, "num_hidden_layers"), vision_int(vc, "num_attention_heads")
    patch, image = vision_int(vc, "patch_size"), vision_int(vc, "image_size")
    channels = vision_int(vc, "num_channels", default=3)  # SiglipVisionConfig's default
    if vc.get("vision_use_head"):
        raise ConfigError("vision_config.vision_use_head is true: memprof does not model the "
                          "SigLIP pooling head", hint="Gemma 3 checkpoints set it false")
    side = image // patch
    tokens = vision_int(raw, "mm_tokens_per_image", default=256)  # Gemma3Config's default
    per_side = math.isqrt(tokens)
    if per_side * per_side != tokens or side % per_side:
        raise ConfigError(f"mm_tokens_per_image {tokens} is no square that pools the "
                          f"{side}×{side} patches evenly",
                          hint="fix mm_tokens_per_image in the config.json")
    g = "mm projector"
    return VisionTower(
        depth=n_layers, hidden=h, intermediate=inter, heads=heads, in_channels=channels,
        patch=patch, merge=side // per_side, out_hidden=text_hidden, gated=False,
        norm_bias=True, patch_bias=True, quantised=True, mlp_quant_multiple=64,
        position_embeddings=side * side, position_pad=64, position_shard="col",
        outer_norms=("post_layernorm",),
        head=(HeadPart(module="multi_modal_projector.mm_input_projection_weight",
                       out=text_hidden, inn=h, group=g),
              HeadPart(module="multi_modal_projector.mm_soft_emb_norm", out=h, group=g)),
        names=TowerNames(prefix="vision_tower.vision_model.",
                         patch="embeddings.patch_embedding",
                         position="embeddings.position_embedding", block="encoder.layers.{i}.",
                         norm1="layer_norm1", norm2="layer_norm2", qkv="self_attn.qkv_proj",
                         proj="self_attn.out_proj", up="mlp.fc1", down="mlp.fc2"),
        tiles=1, tile_tokens=tokens, placeholder_extra=PLACEHOLDER_EXTRA,
        attn_width=(2, 4), gather_qkv=False, data_mode=False, modalities=("image",),
        skipped=GEMMA3_MM_TOWER_SKIPPED,
        source="vLLM 0.11.0 gemma3_mm.py + siglip.py")


# How SGLang builds Gemma 3's SigLIP tower (python/sglang/srt/models/gemma3_mm.py, siglip.py and
# sglang/srt/configs/model_config.py, read in the PyPI wheels): 0.4.5 - 0.4.6
# Gemma3ForConditionalGeneration builds transformers' own SiglipVisionModel
# (AutoModel.from_config(config.vision_config): plain nn.Linear and nn.Embedding, whole on every
# rank) and its Gemma3MultiModalProjector; from 0.4.7 SGLang's SiglipVisionModel (siglip.py, the
# same from 0.4.7 to 0.5.9 but for the attention backend's name): a Conv2d patch embedding with
# bias, position_embedding a VocabParallelEmbedding (padded to 64, split over TP), LayerNorm
# layers with VisionAttention (qkv column-parallel, proj row-parallel) and fc1 / fc2 (column /
# row), post_layernorm: vLLM's tower and split. The tower is built whatever the multimodal
# setting; Gemma 3 is multimodal by default at 0.4.5 only (is_multimodal_model of its
# architecture), from 0.4.6 ModelConfig puts it in mm_disabled_models.
GEMMA3_MM_SGLANG = (
    Rule(name="sglang_vision_tower (gemma3_mm)", changes="weights: vision tower", since=None,
         until="0.4.5", value=EngineTower(build="absent"), engine="sglang",
         applies_to="gemma3_mm", introduced_by="before 0.4.3 (the oldest release modelled)",
         removed_by="read in the sglang 0.4.5 wheel (first with models/gemma3_mm.py)",
         source="sglang 0.4.3 / 0.4.4 wheels: no models/gemma3_mm.py"),
    Rule(name="sglang_vision_tower (gemma3_mm)", changes="weights: vision tower",
         since="0.4.5", until="0.4.6", value=EngineTower(build="whole"), engine="sglang",
         applies_to="gemma3_mm", introduced_by="read in the sglang 0.4.5 wheel",
         removed_by="read in the sglang 0.4.6 wheel (mm_disabled_models)",
         source="sglang 0.4.5 models/gemma3_mm.py: self.vision_tower = "
         "AutoModel.from_config(config=config.vision_config); configs/model_config.py: "
         "is_multimodal = is_multimodal_model(architectures)"),
    Rule(name="sglang_vision_tower (gemma3_mm)", changes="weights: vision tower",
         since="0.4.6", until="0.4.7", value=EngineTower(build="whole", multimodal=False),
         engine="sglang", applies_to="gemma3_mm", introduced_by="read in the sglang 0.4.6 wheel",
         removed_by="read in the sglang 0.4.7 wheel (SGLang's own siglip.py)",
         source="sglang 0.4.6 models/gemma3_mm.py (AutoModel.from_config); configs/"
         "model_config.py: Gemma3ForConditionalGeneration in mm_disabled_models"),
    *around_snapshots(Rule(
         name="sglang_vision_tower (gemma3_mm)", changes="weights: vision tower",
         since="0.4.7", until=None,
         value=EngineTower(build="sharded", multimodal=False), engine="sglang",
         applies_to="gemma3_mm", introduced_by="read in the sglang 0.4.7 wheel",
         source="sglang 0.4.7 / 0.4.9 / 0.5.5 / 0.5.9 models/gemma3_mm.py: self.vision_tower = "
         "SiglipVisionModel(config.vision_config, quant_config) (models/siglip.py); "
         "mm_disabled_models")),
)

_NORMS = ("pre_feedforward_layernorm", "post_feedforward_layernorm")
_GEMMA3_VIEW = _view(GEMMA3_DEFAULTS, rope_keeps_max_len=True)

# vLLM's --dtype auto for these model types (memprof/core/auto_dtype.py): Gemma 2's float32
# checkpoints in bfloat16 before 0.9.1 ("For Gemma 2, we downcast float32 to bfloat16 instead of
# float16 by default", config.py _get_and_verify_dtype, read in 0.6.0-0.9.0), and no float16 for
# model types gemma2 and gemma3 from 0.9.1 (_FLOAT16_NOT_SUPPORTED_MODELS, "Numerical
# instability", read in 0.9.1, 0.9.2 and 0.10.1.1)
def _no_float16(family: str) -> Rule:
    return Rule(name=f"{family}_auto_dtype", changes="--dtype auto: no float16 for the model type",
                since="0.9.1", until=None, value="no_float16",
                introduced_by="0.9.1 config.py _FLOAT16_NOT_SUPPORTED_MODELS",
                source="0.9.1 / 0.9.2 config.py, 0.10.1.1 config/__init__.py "
                "_FLOAT16_NOT_SUPPORTED_MODELS and _is_valid_dtype", applies_to=family)


GEMMA2_AUTO_DTYPE = (
    Rule(name="gemma2_auto_dtype", changes="--dtype auto: a float32 Gemma 2 in bfloat16",
         since=None, until="0.9.1", value="bf16_for_fp32", introduced_by="before 0.6.0",
         removed_by="0.9.1 config.py _resolve_auto_dtype",
         source="0.6.0 / 0.7.0 / 0.8.5 / 0.9.0 config.py _get_and_verify_dtype",
         applies_to="gemma2"),
    _no_float16("gemma2"))
GEMMA3_AUTO_DTYPE = (_no_float16("gemma3_mm"),)


def sglang_bf16_for_fp32(family: str, model_type: str, since: str | None) -> Rule:
    """SGLang's ``--dtype auto`` serves a float32 checkpoint of ``family`` (its config's
    ``model_type``) in bfloat16 from ``since``: sglang 0.4.3 / 0.4.4 srt/configs/model_config.py
    ``_get_and_verify_dtype`` tests ``config.model_type == 'gemma2'``, 0.4.5 - 0.5.23
    ``model_type.startswith('gemma')``."""
    test = ("config.model_type == 'gemma2' in 0.4.3 / 0.4.4, model_type.startswith('gemma') "
            "from 0.4.5" if since is None else "model_type.startswith('gemma'), 0.4.5 - 0.5.23")
    return Rule(name=f"sglang_auto_dtype ({family})",
                changes="--dtype auto: a float32 checkpoint in bfloat16", since=since,
                until=None, value="bf16_for_fp32", engine="sglang", applies_to=family,
                introduced_by=("before 0.4.3 (read in the sglang 0.4.3 wheel, the oldest release "
                               "modelled)" if since is None else
                               f"read in the sglang {since} wheel (first release with it)"),
                source=f"sglang configs/model_config.py _get_and_verify_dtype: {test} "
                f"(model type {model_type!r}): 'we downcast float32 to bfloat16 instead of "
                "float16 by default'")


GEMMA2_SGLANG_AUTO_DTYPE = (sglang_bf16_for_fp32("gemma2", "gemma2", None),)
GEMMA3_SGLANG_AUTO_DTYPE = (sglang_bf16_for_fp32("gemma3", "gemma3_text", "0.4.5"),)
GEMMA3_MM_SGLANG_AUTO_DTYPE = (sglang_bf16_for_fp32("gemma3_mm", "gemma3", "0.4.5"),)

# vLLM's LoRA support: Gemma2ForCausalLM, Gemma3ForCausalLM and Gemma3ForConditionalGeneration
# are SupportsLoRA with q/k/v and gate/up packed (3 and 2 slices) and no embedding modules
# (``embedding_modules = {}``, the SupportsLoRA default from 0.8.0): every linear of the decoder
# carries LoRA, the tied embed_tokens / lm_head none, and no class grows its vocabulary (their
# files never read lora_extra_vocab_size; gemma2.py / gemma3.py ``del lora_config``). The
# Gemma 3 wrapper puts LoRA on its language model only: the tower and the projector are
# filtered out (0.8.5 lora/models.py ``_filter_unsupported_mm_module``; 0.33.0
# lora/model_manager.py: tower LoRA only under ``enable_tower_connector_lora``, default False,
# which memprof does not take)
_GEMMA_LORA = LoraSupport(extra_vocab=False, embeddings=False)


def _gemma_lora(family: str, since: str, introduced_by: str, files: str) -> tuple[Rule, ...]:
    return (Rule(name=f"{family}_lora", changes="LoRA: modules", since=since, until=None,
                 value=_GEMMA_LORA, introduced_by=introduced_by,
                 source=f"0.7.1 / 0.8.0 / 0.8.5 / 0.10.2 / 0.12.0 / 0.16.0 / 0.20.0 / 0.28.0 / "
                 f"0.33.0 model_executor/models/{files} (SupportsLoRA, packed_modules_mapping; "
                 "no embedding_modules)", applies_to=family),)


GEMMA2_LORA = _gemma_lora("gemma2", "0.7.0", "before 0.7.0", "gemma2.py Gemma2ForCausalLM")
GEMMA3_LORA = _gemma_lora("gemma3", "0.8.0", "Gemma 3 support (first released in 0.8.0)",
                          "gemma3.py Gemma3ForCausalLM")
GEMMA3_MM_LORA = _gemma_lora("gemma3_mm", "0.8.0",
                             "Gemma 3 support (first released in 0.8.0)",
                             "gemma3_mm.py Gemma3ForConditionalGeneration, gemma3.py")

GEMMA2 = Family(
    name="gemma2", model_types=("gemma2",), architectures=("Gemma2ForCausalLM",),
    vllm_auto_dtype=GEMMA2_AUTO_DTYPE, sglang_auto_dtype=GEMMA2_SGLANG_AUTO_DTYPE,
    release_rules=lambda: (GEMMA2_AUTO_DTYPE, GEMMA2_SGLANG_AUTO_DTYPE),
    sglang_fa3_listed=(sglang_fa3_listed("gemma2", "0.4.6", "0.5.8", ("Gemma2ForCausalLM",)),),
    build=_gemma2_layers, attention="gqa", config_view=_view(GEMMA2_DEFAULTS), lora=GEMMA2_LORA,
    layer_norms=_NORMS, source="vLLM model_executor/models/gemma2.py (0.12.0)",
    v0_mlp_gate_up=v0_gate_up_rows("gemma2", "gemma2.py", "Gemma2MLP",
                                   (("0.6.5", None, "kept", "0.6.5, 0.7.3"),)),
)
GEMMA3 = Family(
    name="gemma3", model_types=("gemma3_text",), architectures=("Gemma3ForCausalLM",),
    build=_gemma3_layers, attention="gqa", config_view=_GEMMA3_VIEW, lora=GEMMA3_LORA,
    layer_norms=_NORMS, source="vLLM model_executor/models/gemma3.py (0.12.0)",
    sglang_auto_dtype=GEMMA3_SGLANG_AUTO_DTYPE, release_rules=lambda: (GEMMA3_SGLANG_AUTO_DTYPE,),
    v0_mlp_gate_up=v0_gate_up_rows("gemma3", "gemma3.py", "Gemma3MLP",
                                   (("0.8.5", None, "kept", "0.8.5"),)),
)
GEMMA3_MM = Family(
    name="gemma3_mm", model_types=("gemma3",), architectures=("Gemma3ForConditionalGeneration",),
    vllm_auto_dtype=GEMMA3_AUTO_DTYPE, sglang_auto_dtype=GEMMA3_MM_SGLANG_AUTO_DTYPE,
    sglang_fa3_listed=(sglang_fa3_listed("gemma3_mm", "0.4.6", "0.5.8",
                                         ("Gemma3ForConditionalGeneration",)),),
    build=_gemma3_layers, attention="gqa", config_view=_GEMMA3_VIEW,
    layer_norms=_NORMS, vision=siglip_tower, lora=GEMMA3_MM_LORA,
    release_rules=lambda: (GEMMA3_MM_TOWER_SKIPPED, GEMMA3_AUTO_DTYPE,
                           GEMMA3_MM_SGLANG_AUTO_DTYPE),
    sglang_tower=GEMMA3_MM_SGLANG,
    v0_mlp_gate_up=v0_gate_up_rows("gemma3_mm", "gemma3.py", "Gemma3MLP",
                                   (("0.8.5", None, "kept", "0.8.5"),)),
    source="vLLM model_executor/models/gemma3_mm.py + siglip.py + gemma3.py (0.12.0)",
)
