"""Phi-3 / Phi-4 (``Phi3ForCausalLM``): the bundled Phi-4 config, its weight bytes by hand
against the checkpoint's safetensors index, TP sharding, LongRoPE's two rotary caches, and
estimates at TP1 and TP2.

Config: HF microsoft/phi-4 config.json (a public quotation; see ``configs/models/phi-4.json``'s
``_source``). Checkpoint: microsoft/phi-4 ``model.safetensors.index.json`` ``metadata.total_size``
29319014400 (bf16). Layout: vLLM ``vllm/model_executor/models/phi3.py`` (``LlamaForCausalLM``
with packed qkv_proj / gate_up_proj); LongRoPE: vLLM
``model_executor/layers/rotary_embedding/phi3_long_rope_scaled_rope.py``
(``long_short_cos_sin_cache``: short ``original_max_position_embeddings`` rows + long
``max_position_embeddings`` rows, model dtype).
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

H, LAYERS, HEADS, KV_HEADS, INTER, V, HD = 5120, 40, 40, 10, 17920, 100352, 128
TOTAL_SIZE = 29_319_014_400  # microsoft/phi-4 model.safetensors.index.json metadata.total_size


def _rank_bytes(tp: int, rank: int = 0) -> int:
    spec = load_model("phi-4")
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[rank], "sm90"))


def _config() -> dict[str, object]:
    cfg = json.loads(bundled_models()["phi-4"].read_text())
    assert isinstance(cfg, dict)
    return cfg


def test_spec_from_the_config() -> None:
    spec = load_model("phi-4")
    assert (spec.family, spec.architecture, spec.num_layers) == ("phi3", "Phi3ForCausalLM", 40)
    a, m = spec.layers[0].attention, spec.layers[0].mlp
    assert (a.kind, a.num_heads, a.num_kv_heads, a.head_dim, a.sliding_window) == (
        "gqa", HEADS, KV_HEADS, HD, None)
    assert not (a.qkv_bias or a.o_bias or a.qk_norm)
    assert (m.kind, m.intermediate_size) == ("dense", INTER)
    assert not spec.mtp_layers


def test_weight_bytes_match_the_checkpoint_index() -> None:
    per_layer = (H * (HEADS + 2 * KV_HEADS) * HD  # qkv_proj (fused in the checkpoint)
                 + HEADS * HD * H  # o_proj
                 + 2 * INTER * H  # gate_up_proj (fused in the checkpoint)
                 + INTER * H  # down_proj
                 + 2 * H)  # input and post-attention RMSNorm
    params = LAYERS * per_layer + 2 * V * H + H  # embed_tokens, untied lm_head, final norm
    assert 2 * params == TOTAL_SIZE
    assert _rank_bytes(tp=1) == TOTAL_SIZE


def test_tp2_splits_heads_mlp_and_vocab() -> None:
    per_layer = (H * (HEADS + 2 * KV_HEADS) * HD // 2 + HEADS * HD * H // 2
                 + 3 * (INTER // 2) * H + 2 * H)
    expected = 2 * (LAYERS * per_layer + 2 * (V // 2) * H + H)
    assert _rank_bytes(tp=2, rank=1) == expected
    assert abs(2 * _rank_bytes(tp=2) - TOTAL_SIZE) / TOTAL_SIZE < 0.005  # only norms repeat


def test_default_rope_is_one_cache_of_max_positions() -> None:
    spec = load_model("phi-4")
    [cache] = rope_caches(spec, spec.layers, "bfloat16")
    assert (cache.positions, cache.rotary_dim, cache.bytes) == (16384, HD, 16384 * HD * 2)


def test_longrope_keeps_the_short_and_the_long_cache() -> None:
    # Phi-3-mini-128k-instruct's rope settings: longrope, original 4096, max 131072
    cfg = {**_config(), "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096,
           "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 64,
                            "long_factor": [1.5] * 64}}
    spec = spec_from_config(cfg)
    [cache] = rope_caches(spec, spec.layers, "bfloat16")
    assert cache.positions == 4096 + 131072
    assert cache.bytes == (4096 + 131072) * HD * 2


def test_longrope_without_original_positions_is_refused() -> None:
    cfg = {**_config(), "rope_scaling": {"type": "longrope", "short_factor": [1.0],
                                         "long_factor": [1.0]}}
    del cfg["original_max_position_embeddings"]
    spec = spec_from_config(cfg)
    with pytest.raises(ConfigError, match="original_max_position_embeddings"):
        rope_caches(spec, spec.layers, "bfloat16")


def test_a_sliding_window_is_every_layers_window() -> None:
    spec = spec_from_config({**_config(), "sliding_window": 2047})
    assert {layer.attention.sliding_window for layer in spec.layers} == {2047}


@pytest.mark.parametrize("tp", [1, 2])
def test_estimates_at_tp1_and_tp2(tp: int) -> None:
    est = estimate("phi-4", Deployment(tp=tp), gpu_name="H100")
    assert est.verdict == "fits"
    rank = est.ranks[0]
    assert rank.kv.tokens > 0
    # KV per token per rank: K and V, 10 KV heads split by TP, 40 layers, 128 wide, bf16
    assert rank.kv.kv_cache_bytes == rank.kv.tokens * LAYERS * 2 * (KV_HEADS // tp) * HD * 2
    weights = sum(t.bytes for t in rank.tensors)
    assert weights == _rank_bytes(tp)
