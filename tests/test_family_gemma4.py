"""Gemma 4 (``memprof/core/models/families/gemma4.py``): the spec read from the bundled verbatim
config of google/gemma-4-26B-A4B, its weight bytes by hand from vLLM's layout, the parameter
count against the model card, the KV pool whose two layer types vLLM unifies to one page size,
and the layouts memprof refuses.

Layout: vLLM 0.19.0 ``model_executor/models/gemma4.py`` (``Gemma4Attention``: one
``QKVParallelLinear`` per layer, a k_eq_v global layer's V slot allocated too; q/k norms of
the head size; ``Gemma4MLP`` beside ``Gemma4Router`` + ``Gemma4MoE``; four hidden norms a
layer; tied embeddings) and ``gemma4_mm.py`` (transformers' vision tower, whole on each rank,
and ``embed_vision.embedding_projection``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memprof.base.errors import BadInput, ConfigError
from memprof.core.deployment import Deployment, ranks
from memprof.core.kvcache import kv_plan
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.weights import rank_weights

H, V, LAYERS, HEADS = 2816, 262_144, 30, 16
SLIDING_KV, SLIDING_HD, GLOBAL_KV, GLOBAL_HD = 8, 256, 2, 512
E, I_MOE, I_DENSE = 128, 704, 2112
VH, VI, VDEPTH, PATCH, POSITIONS = 1152, 4304, 27, 16, 10_240
N_GLOBAL = 5  # every sixth layer of layer_types is full_attention


def _config() -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads(bundled_models()["gemma-4-26b-a4b"].read_text())
    return cfg


def _rank_bytes(tp: int, rank: int = 0) -> int:
    spec = load_model("gemma-4-26b-a4b")
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[rank], "sm90"))


def _vision_params() -> int:
    block = 4 * VH * VH + 3 * VH * VI + 2 * VH  # q, k, v, o; gate, up, down; two norms charged
    return (3 * PATCH * PATCH * VH + 2 * POSITIONS * VH  # input_proj, position_embedding_table
            + VDEPTH * block + VH * H)  # + embed_vision.embedding_projection


def _text_params(tp: int) -> int:
    sliding = (H * (HEADS + 2 * SLIDING_KV) * SLIDING_HD // tp + HEADS * SLIDING_HD * H // tp
               + 2 * SLIDING_HD)  # qkv_proj, o_proj, q_norm + k_norm
    # k_eq_v: QKVParallelLinear allocates the V slot (the checkpoint's K loaded twice)
    full = (H * (HEADS + 2 * GLOBAL_KV) * GLOBAL_HD // tp + HEADS * GLOBAL_HD * H // tp
            + 2 * GLOBAL_HD)
    per_layer = (E * H  # router proj, replicated
                 + E * 3 * (I_MOE // tp) * H  # experts w13 + w2, split along I
                 + 3 * (I_DENSE // tp) * H  # the dense MLP beside them
                 + 4 * H)  # input, post-attention, pre- and post-feedforward norms
    return (V // tp * H + (LAYERS - N_GLOBAL) * sliding + N_GLOBAL * full + LAYERS * per_layer
            + H)  # + final norm; lm_head tied to embed_tokens


def test_spec_from_the_config() -> None:
    spec = load_model("gemma-4-26b-a4b")
    assert (spec.family, spec.architecture, spec.num_layers, spec.hidden_size) == (
        "gemma4", "Gemma4ForConditionalGeneration", 30, 2816)
    assert spec.tie_word_embeddings and spec.vocab_size == V
    full = [x.index for x in spec.layers if x.attention.sliding_window is None]
    assert full == [5, 11, 17, 23, 29]
    g, s = spec.layers[5].attention, spec.layers[0].attention
    assert (g.num_kv_heads, g.head_dim, g.rope_theta) == (GLOBAL_KV, GLOBAL_HD, 1e6)
    assert (s.num_kv_heads, s.head_dim, s.rope_theta, s.sliding_window) == (
        SLIDING_KV, SLIDING_HD, 1e4, 1024)
    assert g.qk_norm and s.qk_norm and not (g.qkv_bias or s.qkv_bias)
    m = spec.layers[0].mlp
    assert (m.kind, m.num_experts, m.top_k, m.moe_intermediate_size,
            m.shared_intermediate_size, m.activation) == (
        "moe", E, 8, I_MOE, I_DENSE, "gelu_pytorch_tanh")
    t = spec.vision
    assert t is not None and (t.depth, t.hidden, t.merge, t.tile_tokens, t.whole) == (
        VDEPTH, VH, 3, 280, True)


def test_weight_bytes_by_hand() -> None:
    assert _rank_bytes(tp=1) == 2 * (_text_params(1) + _vision_params())  # bfloat16


def test_tp2_splits_the_language_model_and_keeps_the_vision_tower_whole() -> None:
    assert _rank_bytes(tp=2, rank=1) == 2 * (_text_params(2) + _vision_params())


def test_parameters_match_the_model_card() -> None:
    # the checkpoint has no v_proj on the five k_eq_v global layers: vLLM's copy is extra
    checkpoint_text = _text_params(1) - N_GLOBAL * GLOBAL_KV * GLOBAL_HD * H
    # google/gemma-4-26B-A4B model card: 25.2B total parameters (language model), a vision
    # encoder of ~550M
    assert abs(checkpoint_text / 25.2e9 - 1) < 0.005
    assert abs(_vision_params() / 550e6 - 1) < 0.05


def test_the_two_layer_types_are_unified_to_one_page() -> None:
    # sliding: 8 KV heads × 256 at block 16 = 128 KiB a page; global: 2 × 512 = 64 KiB at
    # block 16, so vLLM's unify_kv_cache_spec_page_size doubles its block to 32
    spec = load_model("gemma-4-26b-a4b")
    dep = Deployment(tp=1, engine_version="0.19.0")
    plan = kv_plan(spec, dep, ranks(dep)[0], "bfloat16")
    assert plan.layout == "hybrid"
    assert {s.page_bytes for s in plan.layers} == {2 * 16 * SLIDING_KV * SLIDING_HD * 2}
    assert dict((name, block) for name, block, _w, _n in plan.group_blocks) == {
        "full": 32, "sliding/1024": 16}
    # 25 sliding and 5 global layers: groups of 5 layers, 5 sliding groups and 1 global
    assert [n for *_x, n in plan.group_blocks] == [1, 5]
    assert plan.block_bytes == 5 * 131_072
    assert plan.bytes_per_token == N_GLOBAL * 2 * GLOBAL_KV * GLOBAL_HD * 2


@pytest.mark.parametrize(("key", "value"), [("num_kv_shared_layers", 20),
                                            ("hidden_size_per_layer_input", 256)])
def test_the_small_checkpoints_layout_is_refused(key: str, value: int) -> None:
    cfg = _config()
    cfg["text_config"][key] = value
    with pytest.raises(ConfigError, match=key):
        spec_from_config(cfg)


def test_a_config_without_layer_types_is_refused() -> None:
    cfg = _config()
    del cfg["text_config"]["layer_types"]
    with pytest.raises(ConfigError, match="layer_types"):
        spec_from_config(cfg)


def test_pages_that_do_not_divide_are_refused() -> None:
    # a global head of 384 (3 × 128) beside the sliding 256: pages of 48 and 128 KiB
    cfg = _config()
    cfg["text_config"]["global_head_dim"] = 384
    spec = spec_from_config(cfg)
    dep = Deployment(tp=1, engine_version="0.19.0")
    with pytest.raises(BadInput, match="unify"):
        kv_plan(spec, dep, ranks(dep)[0], "bfloat16")


def test_a_dense_config_builds_one_dense_mlp_a_layer() -> None:
    # the dense checkpoints (31B) set enable_moe_block false: Gemma4MLP alone, no router
    cfg = _config()
    cfg["text_config"]["enable_moe_block"] = False
    spec = spec_from_config(cfg)
    m = spec.layers[0].mlp
    assert (m.kind, m.intermediate_size, m.num_experts) == ("dense", I_DENSE, 0)


def test_without_k_eq_v_the_global_layers_keep_the_sliding_kv_heads() -> None:
    # Gemma4DecoderLayer: num_global_key_value_heads only with attention_k_eq_v
    cfg = _config()
    cfg["text_config"]["attention_k_eq_v"] = False
    spec = spec_from_config(cfg)
    g = spec.layers[5].attention
    assert (g.num_kv_heads, g.head_dim) == (SLIDING_KV, GLOBAL_HD)
