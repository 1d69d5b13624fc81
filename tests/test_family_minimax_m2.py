"""MiniMax-M2 (``MiniMaxM2ForCausalLM``): the bundled MiniMax-M2.7 config, its weight bytes
against the checkpoint's tensor listing (fp8 block-128 weights with fp32 ``weight_scale_inv``,
fp32 router and routing bias, bf16 norms / embeddings), the q/k norms split by TP, partial RoPE
from ``rotary_dim``, and estimates at TP1 and TP4.

Config and tensor listing: a public report of MiniMaxAI/MiniMax-M2.7 (see
``configs/models/minimax-m2.7.json``'s ``_source``). Layout: vLLM
``vllm/model_executor/models/minimax_m2.py`` (read at 01d99586).
"""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment, ranks
from memprof.core.estimate import estimate
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.terms.rope_cache import rope_caches
from memprof.core.weights import rank_weights

H, LAYERS, HEADS, KV, HD, INTER, E, V = 3072, 62, 48, 8, 128, 1536, 256, 200064


def _rank_bytes(tp: int, rank: int = 0) -> int:
    spec = load_model("minimax-m2.7")
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[rank], "sm90"))


def _config() -> dict[str, object]:
    cfg = json.loads(bundled_models()["minimax-m2.7"].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _fp8_block(out: int, inn: int) -> int:  # e4m3 weight + fp32 [out/128, in/128] scale_inv
    return out * inn + 4 * (-(-out // 128)) * (-(-inn // 128))


def test_spec_from_the_config() -> None:
    spec = load_model("minimax-m2.7")
    assert (spec.family, spec.architecture, spec.num_layers) == (
        "minimax_m2", "MiniMaxM2ForCausalLM", LAYERS)
    a, m = spec.layers[0].attention, spec.layers[0].mlp
    assert (a.num_heads, a.num_kv_heads, a.head_dim, a.qk_norm, a.qk_norm_across_heads) == (
        HEADS, KV, HD, True, True)
    assert (m.kind, m.num_experts, m.top_k, m.moe_intermediate_size, m.shared_intermediate_size,
            m.e_score_correction_bias, m.router_fp32) == ("moe", E, 8, INTER, 0, True, True)
    assert not spec.mtp_layers


def test_weight_bytes_match_the_checkpoint_listing() -> None:
    # every tensor of the checkpoint's listing (layers 0-61), in bytes
    per_layer = (E * (2 * _fp8_block(INTER, H) + _fp8_block(H, INTER))  # experts w1, w3, w2
                 + 4 * E * H + 4 * E  # gate.weight, e_score_correction_bias (fp32)
                 + _fp8_block(HEADS * HD, H) + 2 * _fp8_block(KV * HD, H)  # q, k, v
                 + _fp8_block(H, HEADS * HD)  # o_proj
                 + 2 * (HEADS * HD + KV * HD)  # q_norm [6144], k_norm [1024] (bf16)
                 + 2 * 2 * H)  # input / post-attention RMSNorm (bf16)
    checkpoint = LAYERS * per_layer + 2 * 2 * V * H + 2 * H  # embed, lm_head, final norm
    # the report's tensor total "214.32 GB" is in GiB (its per-tensor sizes: 1.14 GB for the
    # 200064×3072 bf16 embedding = 1.145 GiB)
    assert round(checkpoint / 2**30, 2) == 214.32
    assert abs(_rank_bytes(tp=1) - checkpoint) / checkpoint < 0.005


def test_tp4_splits_heads_norms_experts_and_vocab() -> None:
    per_layer = (E * (2 * _fp8_block(INTER // 4, H) + _fp8_block(H, INTER // 4))
                 + 4 * E * H + 4 * E
                 + _fp8_block(HEADS * HD // 4, H) + 2 * _fp8_block(KV * HD // 4, H)
                 + _fp8_block(H, HEADS * HD // 4)
                 + 2 * (HEADS * HD + KV * HD) // 4 + 2 * 2 * H)
    expected = LAYERS * per_layer + 2 * 2 * (V // 4) * H + 2 * H
    assert abs(_rank_bytes(tp=4, rank=3) - expected) / expected < 0.005


def test_rotary_dim_sets_the_partial_rope_cache() -> None:
    spec = load_model("minimax-m2.7")
    [cache] = rope_caches(spec, spec.layers, "bfloat16")
    assert (cache.positions, cache.rotary_dim) == (204800, 64)


def test_lightning_attention_layers_are_refused() -> None:
    cfg = _config()
    cfg["attn_type_list"] = [0] + [1] * (LAYERS - 1)
    with pytest.raises(ConfigError, match="attn_type_list"):
        spec_from_config(cfg)


def test_estimates_at_tp1_and_tp4() -> None:
    one = estimate("minimax-m2.7", Deployment(tp=1), gpu_name="H100")
    assert one.verdict == "startup_oom"  # ~214 GB of weights on one 80 GB card
    four = estimate("minimax-m2.7", Deployment(tp=4), gpu_name="H100")
    assert four.verdict == "fits"
    kv = four.ranks[0].kv
    per_token = LAYERS * 2 * (KV // 4) * HD * 2
    assert kv.kv_cache_bytes % per_token == 0
    # the token line is int(max_concurrency × max_model_len), in floating point as vLLM prints
    # it (v1/core/kv_cache_utils.py): the pool's tokens, or one fewer
    assert kv.kv_cache_bytes // per_token - kv.tokens in (0, 1)
