"""Qwen3.5-0.8B, bundled from its hub config.json (configs/models/qwen3.5-0.8b.json, vendored
verbatim in a public model catalog) so that the vLLM 0.28.0 rows of tests/data/published.json
that name it run (1704: offline LLM at the config's 262,144 context; 1706: vllm serve at 8,192):
the checkpoint's weight bytes counted by hand from the config (the hybrid text model: six gated
full-attention layers, eighteen Gated DeltaNet layers; the 12-block vision tower vLLM loads),
memprof's rank weights held to that count within 0.5 %, and the rows run and start."""

from __future__ import annotations

from typing import Any

import pytest
from weight_helpers import bundled_config, rank_weight_bytes

from memprof.core.models import load_model
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import row_estimate


def _hand_bytes(cfg: dict[str, Any]) -> tuple[int, int]:
    """(text model, vision tower) bytes of the bf16 checkpoint without its MTP layer (vLLM loads
    that only for speculative decoding): gated q (2 x heads x head_dim), k, v, o and the q/k
    norms on the full-attention layers; on the Gated DeltaNet layers in_proj_qkvz, in_proj_ba,
    the depthwise conv over q, k and v, dt_bias, A_log (float32), the gated norm and out_proj;
    the gated MLP and two RMSNorms a layer; the tied embedding once. The vision tower: the
    patch embedding, learned positions, each block's two LayerNorms, qkv, proj and MLP (with
    biases), and the 2x2 patch merger."""
    t, v = cfg["text_config"], cfg["vision_config"]
    h, vocab, inter = t["hidden_size"], t["vocab_size"], t["intermediate_size"]
    heads, kv, hd = t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
    nk, nv, dk, dv, ker = (t[k] for k in (
        "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
        "linear_value_head_dim", "linear_conv_kernel_dim"))
    full = 2 * (heads * hd * 2 * h + 2 * kv * hd * h + heads * hd * h + 2 * hd)
    conv = 2 * nk * dk + nv * dv
    gdn = 2 * ((conv + nv * dv) * h + 2 * nv * h + conv * ker + nv + dv + nv * dv * h) + 4 * nv
    dense = 2 * (3 * inter * h + 2 * h)
    text = 2 * vocab * h + 2 * h + sum(
        dense + (full if kind == "full_attention" else gdn) for kind in t["layer_types"])
    vh, vi, merged = v["hidden_size"], v["intermediate_size"], v["hidden_size"] * v[
        "spatial_merge_size"] ** 2
    block = 2 * 2 * vh + 3 * vh * vh + 3 * vh + vh * vh + vh + 2 * vi * vh + vi + vh
    out = v["out_hidden_size"]
    vision = 2 * (v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 * vh + vh
                  + v["num_position_embeddings"] * vh + v["depth"] * block
                  + 2 * vh + merged * merged + merged + out * merged + out)
    return text, vision


def test_the_config_is_the_hub_file() -> None:
    cfg = bundled_config("qwen3.5-0.8b")
    assert cfg["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    t = cfg["text_config"]
    assert t["layer_types"] == (["linear_attention"] * 3 + ["full_attention"]) * 6
    assert (t["hidden_size"], t["num_hidden_layers"], t["vocab_size"]) == (1024, 24, 248320)
    assert cfg["tie_word_embeddings"] is True and t["mtp_num_hidden_layers"] == 1
    assert "728e0b0834a8b0fd382d312c27ed755ffe29b8c3" in cfg["_source"]


def test_rank_weights_match_the_hand_count() -> None:
    text, vision = _hand_bytes(bundled_config("qwen3.5-0.8b"))
    assert (text, vision) == (1_504_786_624, 201_185_792)
    got = rank_weight_bytes("Qwen/Qwen3.5-0.8B", "sm80", "0.28.0")
    assert abs(got - (text + vision)) <= 0.005 * (text + vision), got
    assert load_model("Qwen/Qwen3.5-0.8B").name == "qwen3.5-0.8b"


@pytest.mark.parametrize("rid", [1704, 1706])
def test_the_rows_run_and_start(rid: int) -> None:
    row = next(r for r in PUBLISHED if r["id"] == rid)
    est, _ = row_estimate(row)
    assert est.gpu.name == "A100-PCIe-80GB" and est.verdict == "fits"
    # memprof's KV tokens against the log's (1704: 5,968,610 / 5,788,118; 1706: 3,821,195 /
    # 3,697,198): within the 5 % band the distribution test reports
    assert abs(est.kv_cache_tokens / row["observed"]["kv_tokens"] - 1) < 0.05


def test_the_load_figure_by_hand_from_the_checkpoint_header() -> None:
    # The checkpoint's safetensors headers (github.com/KinChow/model-structure-viewer @
    # 442647cb0bdb5454431c545704bca7002c28e0cd: models/Qwen/Qwen3.5-0.8B/header-truth.json, read
    # from the hub files): 873,438,784 parameters, 873,436,192 of them BF16 and 2,592 F32
    # (18 Gated DeltaNet layers × (A_log 16 + the gated norm 128)); 15 tensors are the MTP
    # layer's, which vLLM 0.28.0 skips (qwen3_5.py load_weights: skip_prefixes=["mtp."]).
    cfg = bundled_config("qwen3.5-0.8b")
    h = cfg["text_config"]["hidden_size"]
    checkpoint = 873_436_192 * 2 + 2_592 * 4
    # MTP: one gated full-attention layer (q 2·8·256, k and v 2·256, o, q/k norms), the MLP,
    # two layer norms, fc [H, 2H] and three norms (pre_fc_norm_hidden/_embedding, norm)
    mtp = 2 * (h * 4096 + 2 * h * 512 + 2048 * h + 2 * 256 + 3 * 3584 * h + 2 * h
               + 2 * h * h + 3 * h)
    text, vision = _hand_bytes(cfg)
    # the checkpoint keeps the gated norm in F32, vLLM builds that parameter in the model dtype
    assert checkpoint - mtp - 18 * 128 * 2 == text + vision
    # vLLM 0.28.0's rotary for the config's mrope_section is MRotaryEmbedding, whose cache spans
    # 4 × max_position_embeddings (rotary_embedding/mrope.py: cache_max_position_num), 64 wide
    # (head_dim 256 × partial_rotary_factor 0.25), bf16: 128 MiB, not 32
    mrope = 4 * 262_144 * 64 * 2
    row = next(r for r in PUBLISHED if r["id"] == 1704)
    est, _ = row_estimate(row)
    rank = est.ranks[0]
    assert {c.name: c.bytes for c in rank.components}["RoPE cos/sin cache default ×4 (M-RoPE)"] \
        == mrope
    # "Model loading took 1.72 GiB": the shard and the cache (1.7138 GiB) and the allocator's
    # unsplit blocks (memprof/core/terms/load_rounding.py)
    from memprof.core.estimate import load_figure

    assert abs((text + vision + mrope) / 2**30 - 1.7138) < 0.0001
    assert abs(load_figure(est, rank) / 2**30 / 1.72 - 1) < 0.005
