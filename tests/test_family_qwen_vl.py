"""Qwen2.5-VL and Qwen3-VL (``Qwen2_5_VLForConditionalGeneration``,
``Qwen3VLForConditionalGeneration``): the bundled configs, the language model read from the
flat config / from ``text_config``, the vision tower's bytes by hand against the checkpoints'
safetensors indexes, and its TP sharding as vLLM 0.11.0 builds it.

Checkpoints (``model.safetensors.index.json`` ``metadata.total_size``, bf16):
Qwen/Qwen2.5-VL-7B-Instruct 16584333312; Qwen/Qwen3-VL-4B-Instruct 8875631616, of which
830695424 B are the 315 ``model.visual.`` tensors (both quoted in public repositories; see the
configs' ``_source``). Layout: vLLM 0.11.0 ``model_executor/models/qwen2_5_vl.py`` and
``qwen3_vl.py`` (``memprof/core/models/families/qwen_vl.py`` cites the classes).
"""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment, ranks
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.weights import rank_weights
from memprof.core.weights.vision import GROUP, tower_params

QWEN25_TOTAL = 16_584_333_312
QWEN3_TOTAL = 8_875_631_616
QWEN3_VISUAL = 830_695_424


def _bytes(model: str, dep: Deployment, rank: int = 0, group: str | None = None) -> int:
    spec = load_model(model)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[rank], "sm90")
               if group is None or t.group == group)


def test_qwen2_5_vl_reads_the_flat_config() -> None:
    spec = load_model("qwen2.5-vl-7b-instruct")
    a, m = spec.layers[0].attention, spec.layers[0].mlp
    assert (spec.family, spec.num_layers, spec.hidden_size, spec.vocab_size) == (
        "qwen2_5_vl", 28, 3584, 152064)
    assert (a.num_heads, a.num_kv_heads, a.head_dim, a.qkv_bias, a.sliding_window) == (
        28, 4, 128, True, None)  # use_sliding_window false
    assert (m.kind, m.intermediate_size) == ("dense", 18944)
    v = spec.vision
    assert v is not None
    assert (v.depth, v.hidden, v.intermediate, v.heads, v.patch, v.merge, v.out_hidden) == (
        32, 1280, 3420, 16, 14, 2, 3584)
    assert v.gated and not v.norm_bias and v.deepstack_levels == 0


def test_qwen3_vl_reads_text_config() -> None:
    spec = load_model("qwen3-vl-4b-instruct")
    a = spec.layers[0].attention
    assert (spec.family, spec.num_layers, spec.hidden_size, spec.tie_word_embeddings) == (
        "qwen3_vl", 36, 2560, True)
    assert (a.num_heads, a.num_kv_heads, a.head_dim, a.qk_norm, a.qkv_bias) == (
        32, 8, 128, True, False)
    assert spec.dtype == "bfloat16"  # text_config's dtype, the top level states none
    v = spec.vision
    assert v is not None
    assert (v.depth, v.hidden, v.position_embeddings, v.deepstack_levels, v.embed_width) == (
        24, 1024, 2304, 3, 4 * 2560)


def test_qwen2_5_vl_weights_match_the_checkpoint_index() -> None:
    # language model: Qwen2-7B layout, untied lm_head
    h, inter, layers, vocab, kv = 3584, 18944, 28, 152064, 512
    layer = (h * h + h) + 2 * (kv * h + kv) + h * h + 3 * h * inter + 2 * h
    text = 2 * vocab * h + layers * layer + h
    # vision: Conv3d 3·2·14·14 → 1280 (no bias); 32 blocks of 2 RMSNorms, qkv + bias, proj +
    # bias, gate_up + bias, down + bias; merger RMSNorm 1280, 5120→5120 and 5120→3584 with biases
    vh, vi = 1280, 3420
    block = 2 * vh + (3 * vh * vh + 3 * vh) + (vh * vh + vh) + (2 * vi * vh + 2 * vi) + (
        vh * vi + vh)
    merger = vh + (5120 * 5120 + 5120) + (3584 * 5120 + 3584)
    vision = 3 * 2 * 14 * 14 * vh + 32 * block + merger
    spec = load_model("qwen2.5-vl-7b-instruct")
    assert spec.vision is not None and tower_params(spec.vision) == vision
    assert 2 * (text + vision) == QWEN25_TOTAL
    assert _bytes("qwen2.5-vl-7b-instruct", Deployment()) == QWEN25_TOTAL
    assert _bytes("qwen2.5-vl-7b-instruct", Deployment(), group=GROUP) == 2 * vision


def test_qwen3_vl_weights_match_the_checkpoint_index() -> None:
    # vision: Conv3d 3·2·16·16 → 1024 with bias, pos_embed 2304 × 1024; 24 LayerNorm blocks with
    # fc1/fc2; the merger (LayerNorm 1024) and 3 deepstack mergers (LayerNorm 4096)
    vh, vi, out = 1024, 4096, 2560
    block = 4 * vh + (3 * vh * vh + 3 * vh) + (vh * vh + vh) + (vi * vh + vi) + (vh * vi + vh)

    def merger(norm: int) -> int:
        return 2 * norm + (4 * vh * 4 * vh + 4 * vh) + (out * 4 * vh + out)

    vision = (3 * 2 * 16 * 16 * vh + vh + 2304 * vh + 24 * block + merger(vh)
              + 3 * merger(4 * vh))
    assert 2 * vision == QWEN3_VISUAL
    assert _bytes("qwen3-vl-4b-instruct", Deployment(), group=GROUP) == QWEN3_VISUAL
    assert _bytes("qwen3-vl-4b-instruct", Deployment()) == QWEN3_TOTAL


def test_tp2_shards_the_vision_linears_and_replicates_the_rest() -> None:
    vh, vi = 1280, 3420
    block = (2 * vh  # norms, replicated
             + (3 * vh * vh + 3 * vh) // 2  # qkv + bias, column-parallel
             + vh * vh // 2 + vh  # proj, row-parallel, bias whole
             + (2 * vi * vh + 2 * vi) // 2  # gate_up + bias, column-parallel
             + vh * vi // 2 + vh)  # down, row-parallel, bias whole
    merger = vh + (5120 * 5120 + 5120) // 2 + 3584 * 5120 // 2 + 3584
    vision = 3 * 2 * 14 * 14 * vh + 32 * block + merger
    got = _bytes("qwen2.5-vl-7b-instruct", Deployment(tp=2), rank=1, group=GROUP)
    assert got == 2 * vision


def test_no_image_and_no_video_builds_no_tower() -> None:
    dep = Deployment(limit_mm_per_prompt='{"image": 0, "video": 0}')
    assert _bytes("qwen2.5-vl-7b-instruct", dep, group=GROUP) == 0
    one = Deployment(limit_mm_per_prompt='{"image": 1, "video": 0}')
    assert _bytes("qwen2.5-vl-7b-instruct", one, group=GROUP) > 0


def test_the_tower_by_pp_stage_and_release() -> None:
    # to 0.32.0 every PP stage builds the tower; from 0.33.0 (Model Runner V2,
    # _mark_tower_model) only the first
    for version, last_has_it in (("0.32.0", True), ("0.33.0", False)):
        dep = Deployment(pp=2, engine_version=version)
        first = _bytes("qwen2.5-vl-7b-instruct", dep, rank=0, group=GROUP)
        last = _bytes("qwen2.5-vl-7b-instruct", dep, rank=1, group=GROUP)
        assert first == QWEN25_TOTAL - 2 * (2 * 152064 * 3584 + 28 * (
            3584 * 3584 + 3584 + 2 * (512 * 3584 + 512) + 3584 * 3584 + 3 * 3584 * 18944
            + 2 * 3584) + 3584)
        assert (last == first) is last_has_it and (last == 0) is not last_has_it


def test_before_0_10_1_the_tower_is_built_whatever_the_limits() -> None:
    limits = '{"image": 0, "video": 0}'
    old = Deployment(limit_mm_per_prompt=limits, engine_version="0.10.0")
    new = Deployment(limit_mm_per_prompt=limits, engine_version="0.10.1")
    assert _bytes("qwen2.5-vl-7b-instruct", old, group=GROUP) == 2 * 676_550_144
    assert _bytes("qwen2.5-vl-7b-instruct", new, group=GROUP) == 0


def test_qwen3_vl_moe_reads_moe_layers_from_text_config() -> None:
    cfg = json.loads(bundled_models()["qwen3-vl-4b-instruct"].read_text())
    cfg.update(architectures=["Qwen3VLMoeForConditionalGeneration"], model_type="qwen3_vl_moe")
    cfg["text_config"].update(model_type="qwen3_vl_moe_text", num_experts=128,
                              num_experts_per_tok=8, moe_intermediate_size=768,
                              decoder_sparse_step=1, mlp_only_layers=[])
    spec = spec_from_config(cfg, name="qwen3-vl-moe")
    mlp = spec.layers[0].mlp
    assert (spec.family, spec.is_moe, mlp.num_experts, mlp.top_k, mlp.moe_intermediate_size) == (
        "qwen3_vl_moe", True, 128, 8, 768)
    assert spec.vision is not None and spec.vision.deepstack_levels == 3


def test_a_multimodal_config_without_vision_config_is_refused() -> None:
    cfg = json.loads(bundled_models()["qwen2.5-vl-7b-instruct"].read_text())
    del cfg["vision_config"]
    with pytest.raises(ConfigError, match="vision_config"):
        spec_from_config(cfg)
    cfg = json.loads(bundled_models()["qwen2.5-vl-7b-instruct"].read_text())
    cfg["vision_config"]["depth"] = "32"
    with pytest.raises(ConfigError, match=r"vision_config\.depth"):
        spec_from_config(cfg)


def test_data_mode_keeps_the_whole_tower_on_every_rank() -> None:
    dep = Deployment(tp=2, mm_encoder_tp_mode="data")
    for rank in (0, 1):
        assert _bytes("qwen2.5-vl-7b-instruct", dep, rank=rank, group=GROUP) == 2 * 676_550_144
