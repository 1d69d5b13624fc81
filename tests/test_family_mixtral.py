"""Mixtral, added by the family recipe (one module + one row + a bundled config): its spec and
its weight bytes by hand from the config.

Config: HF mistralai/Mixtral-8x7B-v0.1 config.json @ ffe1a706bacbd5abddc5ff99432ee38f7e0662fb
(https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/ffe1a706bacbd5abddc5ff99432ee38f7e0662fb/config.json),
bundled as ``configs/models/mixtral-8x7b.json``. Layout: vLLM
``vllm/model_executor/models/mixtral.py`` (``MixtralAttention``: QKVParallelLinear without bias,
row-parallel o_proj; ``MixtralMoE``: replicated gate [E, H], experts w13 [E, 2I, H] and w2
[E, H, I], split by TP along I).
"""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment, ranks
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.weights import rank_weights

H, LAYERS, HEADS, KV_HEADS, INTER, E, V = 4096, 32, 32, 8, 14336, 8, 32000
HD = H // HEADS  # 128: no head_dim in the config, vLLM takes hidden_size // heads


def _rank_bytes(tp: int, rank: int = 0) -> int:
    spec = load_model("mixtral-8x7b")
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[rank], "sm90"))


def test_spec_from_the_config() -> None:
    spec = load_model("mixtral-8x7b")
    assert (spec.family, spec.architecture, spec.num_layers) == ("mixtral", "MixtralForCausalLM",
                                                                 32)
    a, m = spec.layers[0].attention, spec.layers[0].mlp
    assert (a.kind, a.num_heads, a.num_kv_heads, a.head_dim, a.sliding_window) == (
        "gqa", 32, 8, 128, None)
    assert not (a.qkv_bias or a.o_bias or a.qk_norm or a.sinks)
    assert (m.kind, m.num_experts, m.top_k, m.moe_intermediate_size,
            m.shared_intermediate_size) == ("moe", 8, 2, 14336, 0)
    assert all(layer.mlp is m for layer in spec.layers) and not spec.mtp_layers


def test_weight_bytes_by_hand() -> None:
    per_layer = (H * (HEADS + 2 * KV_HEADS) * HD  # qkv_proj
                 + HEADS * HD * H  # o_proj
                 + E * H  # router gate, replicated, no bias
                 + E * 3 * INTER * H  # experts: w1, w3 (fused w13) and w2
                 + 2 * H)  # input and post-attention RMSNorm
    params = LAYERS * per_layer + 2 * V * H + H  # + embed_tokens, lm_head (untied), final norm
    assert params == 46_702_792_704  # "46.7B total parameters" (the model card)
    assert _rank_bytes(tp=1) == 2 * params  # bfloat16


def test_tp2_splits_heads_and_expert_intermediate() -> None:
    per_layer = (H * (HEADS + 2 * KV_HEADS) * HD // 2 + HEADS * HD * H // 2
                 + E * H + E * 3 * (INTER // 2) * H + 2 * H)
    expected = 2 * (LAYERS * per_layer + 2 * (V // 2) * H + H)
    assert _rank_bytes(tp=2, rank=1) == expected


def test_a_config_without_kv_heads_is_refused() -> None:
    # MixtralConfig defaults num_key_value_heads to 8, not to the query heads: memprof does
    # not guess it
    cfg = json.loads(bundled_models()["mixtral-8x7b"].read_text())
    del cfg["num_key_value_heads"]
    with pytest.raises(ConfigError, match="num_key_value_heads"):
        spec_from_config(cfg)
