"""GLM-4.5 / GLM-4.6 (``Glm4MoeForCausalLM``): the bundled GLM-4.5-Air config, its weight bytes
by hand (first dense layer, routed + shared experts, fp32 router and correction bias, q/k/v
biases), TP sharding, partial RoPE, the MTP layer only under speculative decoding, and estimates
at TP1 and TP4.

Config: a public quotation of HF zai-org/GLM-4.5-Air config.json (``configs/models/
glm-4.5-air.json``'s ``_source``). Layout: vLLM ``vllm/model_executor/models/glm4_moe.py`` (read
at 002d6073): ``Glm4MoE.gate = nn.Linear(H, E, bias=False, dtype=torch.float32)``,
``e_score_correction_bias`` fp32 [E], shared expert ``moe_intermediate_size × n_shared_experts``,
``skip_spec_layers`` in ``load_weights``.
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

H, LAYERS, HEADS, KV, HD, INTER, E, MOE_I, V = 4096, 46, 96, 8, 128, 10944, 128, 1408, 151552
FIRST_DENSE = 1


def _rank_bytes(tp: int, rank: int = 0, *, mtp: bool = False) -> int:
    spec = load_model("glm-4.5-air", speculative_mtp=mtp)
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[rank], "sm90"))


def _config() -> dict[str, object]:
    cfg = json.loads(bundled_models()["glm-4.5-air"].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _attention(tp: int) -> int:  # bf16 elements
    qkv = H * (HEADS + 2 * KV) * HD // tp + (HEADS + 2 * KV) * HD // tp  # weight + bias
    return qkv + HEADS * HD * H // tp + 2 * H  # o_proj, two RMSNorms


def _moe_bf16(tp: int) -> int:
    return E * 3 * (MOE_I // tp) * H + 3 * (MOE_I // tp) * H  # routed + one shared expert


ROUTER_FP32_BYTES = 4 * (E * H + E)  # gate weight + e_score_correction_bias


def test_spec_from_the_config() -> None:
    spec = load_model("glm-4.5-air")
    assert (spec.family, spec.architecture, spec.num_layers) == (
        "glm4_moe", "Glm4MoeForCausalLM", LAYERS)
    a = spec.layers[0].attention
    assert (a.num_heads, a.num_kv_heads, a.head_dim, a.qkv_bias, a.o_bias, a.qk_norm) == (
        HEADS, KV, HD, True, False, False)
    assert spec.layers[0].mlp.kind == "dense" and spec.layers[0].mlp.intermediate_size == INTER
    m = spec.layers[FIRST_DENSE].mlp
    assert (m.kind, m.num_experts, m.top_k, m.moe_intermediate_size,
            m.shared_intermediate_size, m.e_score_correction_bias, m.router_fp32) == (
        "moe", E, 8, MOE_I, MOE_I, True, True)
    assert all(layer.mlp is m for layer in spec.layers[FIRST_DENSE:])
    assert not spec.mtp_layers


def test_weight_bytes_by_hand() -> None:
    bf16 = (LAYERS * _attention(1) + FIRST_DENSE * 3 * INTER * H
            + (LAYERS - FIRST_DENSE) * _moe_bf16(1) + 2 * V * H + H)
    params = bf16 + (LAYERS - FIRST_DENSE) * (E * H + E)
    assert 105e9 < params < 108e9  # "106B total parameters" (the GLM-4.5 README)
    expected = 2 * bf16 + (LAYERS - FIRST_DENSE) * ROUTER_FP32_BYTES
    assert _rank_bytes(tp=1) == expected


def test_tp4_shards_attention_experts_and_vocab_but_not_the_router() -> None:
    bf16 = (LAYERS * _attention(4) + FIRST_DENSE * 3 * (INTER // 4) * H
            + (LAYERS - FIRST_DENSE) * _moe_bf16(4) + 2 * (V // 4) * H + H)
    expected = 2 * bf16 + (LAYERS - FIRST_DENSE) * ROUTER_FP32_BYTES
    assert _rank_bytes(tp=4, rank=3) == expected


def test_mtp_layer_loads_only_with_speculative_decoding() -> None:
    cfg = {**_config(), "num_nextn_predict_layers": 1}
    assert not spec_from_config(cfg).mtp_layers
    spec = spec_from_config(cfg, with_mtp=True)
    assert [layer.mlp.kind for layer in spec.mtp_layers] == ["moe"]


def test_partial_rope_halves_the_rotary_cache() -> None:
    spec = load_model("glm-4.5-air")
    [cache] = rope_caches(spec, spec.layers, "bfloat16")
    assert (cache.positions, cache.rotary_dim) == (131072, HD // 2)


def test_qk_norm_when_the_config_asks() -> None:  # GLM-4.5 / 4.6 (355B) set use_qk_norm
    spec = spec_from_config({**_config(), "use_qk_norm": True})
    assert spec.layers[0].attention.qk_norm


def test_a_config_without_first_k_dense_replace_is_refused() -> None:
    cfg = _config()
    del cfg["first_k_dense_replace"]
    with pytest.raises(ConfigError, match="first_k_dense_replace"):
        spec_from_config(cfg)


def test_estimates_at_tp1_and_tp4() -> None:
    one = estimate("glm-4.5-air", Deployment(tp=1), gpu_name="H100")
    assert one.verdict == "startup_oom"  # ~213 GB of weights on one 80 GB card
    four = estimate("glm-4.5-air", Deployment(tp=4), gpu_name="H100")
    assert four.verdict == "fits"
    kv = four.ranks[0].kv
    assert kv.kv_cache_bytes == kv.tokens * LAYERS * 2 * (KV // 4) * HD * 2
