"""Granite-4.0-H (``GraniteMoeHybridForCausalLM``) from its bundled config (granite-4.0-h-350m):
the Mamba-2 / NoPE-attention layers of ``layer_types``, the weights by hand, the state per
request and the unified block, the routed experts with the shared MLP, and the refusals.

Layout: vLLM ``model_executor/models/granitemoehybrid.py`` (v0.11.0) and ``MambaMixer2``
(v0.11.2); see the family module. No published start-up log of a Granite-4.0-H was found; the
weights are checked against the hand count below and the "340M parameters" of IBM's card.
"""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment, ranks
from memprof.core.kvcache import kv_plan
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.terms.rope_cache import rope_caches
from memprof.core.weights import rank_weights

NAME = "granite-4.0-h-350m"
H, V, LAYERS, HEADS, KV, SHARED = 768, 100352, 32, 12, 4, 2048
M_HEADS, M_HEAD, GROUPS, STATE, CONV = 48, 32, 1, 128, 4
ATTENTION = [10, 13, 17, 27]


def _config() -> dict[str, object]:
    cfg = json.loads(bundled_models()[NAME].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _rank_bytes(spec: object, tp: int) -> int:
    s = load_model(spec) if isinstance(spec, str) else spec
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(s, dep, s.quant, ranks(dep)[0], "sm90"))


def _by_hand(tp: int) -> int:
    inner = 2 * H  # mamba_expand (default 2) × hidden
    groups = GROUPS + (0 if GROUPS % tp == 0 else tp - GROUPS)  # replicated per head shard
    conv_dim = inner + 2 * groups * STATE
    mamba = ((inner + conv_dim + M_HEADS) // tp * H  # in_proj
             + conv_dim // tp * (CONV + 1)  # conv1d + bias
             + 2 * M_HEADS // tp + inner // tp  # D, dt_bias, gated norm
             + inner // tp * H)  # out_proj
    hd = H // HEADS
    attention = (HEADS * hd + 2 * KV * hd) // tp * H + HEADS * hd // tp * H
    mlp = 3 * SHARED // tp * H  # shared_mlp input_linear (gate+up) and output_linear
    n_attn = len(ATTENTION)
    bf16 = ((LAYERS - n_attn) * mamba + n_attn * attention + LAYERS * (mlp + 2 * H)
            + V // tp * H + H)  # tied embeddings, final norm
    return 2 * bf16 + 4 * (LAYERS - n_attn) * M_HEADS // tp  # A in fp32


def test_layers_from_the_config() -> None:
    spec = load_model(NAME)
    assert spec.family == "granite_hybrid" and spec.num_layers == LAYERS
    assert [layer.index for layer in spec.layers if layer.attention.mixer is None] == ATTENTION
    m = spec.layers[0].attention.mixer
    assert m is not None
    assert (m.kind, m.num_heads, m.head_v_dim, m.num_k_heads, m.head_k_dim, m.intermediate_size,
            m.conv_bias, m.proj_bias) == (
        "mamba2", M_HEADS, M_HEAD, GROUPS, STATE, 2 * H, True, False)
    assert all(layer.mlp.kind == "dense" and layer.mlp.intermediate_size == SHARED
               for layer in spec.layers)
    assert rope_caches(spec, list(spec.layers), "bfloat16") == []  # NoPE


def test_weights_by_hand() -> None:
    assert _rank_bytes(NAME, 1) == _by_hand(1)
    assert _rank_bytes(NAME, 2) == _by_hand(2)  # one group replicated to two head shards
    assert 0.33e9 < _by_hand(1) / 2 < 0.35e9  # "340M parameters"


def test_state_and_block() -> None:
    spec = load_model(NAME)
    dep = Deployment(max_model_len=32768)
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    state = (CONV - 1) * (2 * H + 2 * GROUPS * STATE) * 2 + M_HEADS * M_HEAD * STATE * 2
    per_token = 2 * KV * (H // HEADS) * 2
    assert plan.block_size == 16 * -(-state // (16 * per_token)) == 400
    assert sorted((n, g) for n, _b, _w, g in plan.group_blocks) == [("full", 1), ("state", 7)]


def test_routed_experts_with_the_shared_mlp() -> None:
    spec = spec_from_config({**_config(), "num_local_experts": 8, "num_experts_per_tok": 2,
                             "intermediate_size": 512}, name="g")
    mlp = spec.layers[0].mlp
    assert (mlp.kind, mlp.num_experts, mlp.top_k, mlp.moe_intermediate_size,
            mlp.shared_intermediate_size, mlp.router_fp32) == ("moe", 8, 2, 512, SHARED, False)
    dense = load_model(NAME)
    # routed experts (w13 + w2) and the bf16 gate are added to every layer
    extra = LAYERS * 2 * (8 * 3 * 512 * H + 8 * H)
    assert _rank_bytes(spec, 1) == _rank_bytes(dense, 1) + extra


def test_rope_attention_when_the_config_asks() -> None:
    spec = spec_from_config({**_config(), "position_embedding_type": "rope"}, name="g")
    [cache] = rope_caches(spec, list(spec.layers), "bfloat16")
    assert (cache.positions, cache.rotary_dim) == (32768, H // HEADS)


def test_bad_layer_types_are_refused() -> None:
    with pytest.raises(ConfigError, match="layer_types"):
        spec_from_config({**_config(), "layer_types": ["mamba"] * 31})
    cfg = _config()
    del cfg["mamba_d_state"]
    with pytest.raises(ConfigError, match="mamba_d_state"):
        spec_from_config(cfg)
