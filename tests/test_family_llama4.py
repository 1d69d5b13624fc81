"""Llama 4 (``memprof/core/models/families/llama4.py``): the bundled Scout config, its weight
bytes by hand against the checkpoint's published parameter count, MoE on interleaved layers
(Maverick's step 2), the NoPE / chunked-local layer pattern through the hybrid manager's
chunked groups, the release rule that cached chunked layers in full before 0.14.0, and the
vision tower sharded as vLLM shards it.

Published figures: meta-llama/Llama-4-Scout-17B-16E(-Instruct) 108641793536 parameters and
meta-llama/Llama-4-Maverick-17B-128E(-Instruct) 401583781376 parameters (the checkpoints'
safetensors parameter counts, quoted in public repositories; Fireworks' billing export shows
the same Maverick count as ``parameter_count``).

Layouts: vLLM 0.12.0 ``model_executor/models/llama4.py`` and ``mllama4.py`` (see the family
module's docstring).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment, ranks
from memprof.core.kvcache import kv_plan
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.terms.rope_cache import rope_caches
from memprof.core.weights import rank_weights
from memprof.core.weights.rank import unsharded_total

SCOUT_PARAMS = 108_641_793_536
MAVERICK_PARAMS = 401_583_781_376
H, V, LAYERS, HEADS, KV, HD, I_MOE, I_MLP = 5120, 202_048, 48, 40, 8, 128, 8192, 16384


def _scout() -> dict[str, Any]:
    cfg = json.loads(bundled_models()["llama-4-scout-17b-16e"].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _maverick() -> dict[str, Any]:
    """Maverick's shape on Scout's config: 128 experts, MoE on every 2nd layer (the published
    meta-llama/Llama-4-Maverick-17B-128E text_config differs from Scout's in these two sizes
    and its context length, which no weight depends on)."""
    cfg = _scout()
    cfg["text_config"].update(num_local_experts=128, interleave_moe_layer_step=2)
    return cfg


def _vision() -> int:
    h, inter, layers = 1408, 5632, 34
    per_layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 4 * h
    embeddings = 3 * 14 * 14 * h + h + ((336 // 14) ** 2 + 1) * h + 4 * h
    return layers * per_layer + embeddings + inter * 4096 + 4096 * 4096 + 4096 * H


def _text(experts: int, step: int) -> int:
    attn = H * (HEADS + 2 * KV) * HD + HEADS * HD * H
    moe = H * experts + experts * 3 * H * I_MOE + 3 * H * I_MOE  # router, experts, shared
    dense = 3 * H * I_MLP
    n_moe = LAYERS // step
    return (LAYERS * (attn + 2 * H) + n_moe * moe + (LAYERS - n_moe) * dense
            + 2 * V * H + H)  # untied embed_tokens and lm_head, final norm


def test_scout_weights_match_the_published_count() -> None:
    assert _text(16, 1) + _vision() == SCOUT_PARAMS
    assert unsharded_total(load_model("llama-4-scout-17b-16e"), None) == 2 * SCOUT_PARAMS


def test_maverick_shape_matches_the_published_count() -> None:
    assert _text(128, 2) + _vision() == MAVERICK_PARAMS
    spec = spec_from_config(_maverick())
    assert [x.mlp.kind for x in spec.layers[:4]] == ["dense", "moe", "dense", "moe"]
    assert spec.layers[0].mlp.intermediate_size == I_MLP
    assert unsharded_total(spec, None) == 2 * MAVERICK_PARAMS


def test_nope_and_chunked_layers() -> None:
    spec = load_model("llama-4-scout-17b-16e")
    # no_rope_layers is [] in the config: HF fills it with every 4th layer NoPE
    nope = [x.index for x in spec.layers if x.attention.rope == "none"]
    assert nope == list(range(3, 48, 4))
    assert all(x.attention.chunk_size == 8192 for x in spec.layers if x.index not in nope)
    assert all(x.attention.chunk_size == 0 for x in spec.layers if x.index in nope)
    assert not spec.tie_word_embeddings
    caches = rope_caches(spec, list(spec.layers), "bfloat16")
    assert [(c.positions, c.rotary_dim) for c in caches] == [(262_144, HD)]  # one, NoPE none


def test_chunked_groups_and_the_release_rule() -> None:
    spec = load_model("llama-4-scout-17b-16e")
    dep = Deployment(tp=4)
    plan = kv_plan(spec, dep, ranks(dep)[0], "bfloat16")
    page = 16 * (KV // 4) * 2 * HD * 2  # block 16 × 2 KV heads per rank × (K+V) × bf16
    # 12 full (NoPE) + 36 chunked layers: group size 12, 1 full + 3 chunked groups
    assert plan.layout == "hybrid"
    assert plan.block_bytes == 12 * page
    assert sorted(plan.group_blocks) == [("chunked/8192", 16, 8192, 3), ("full", 16, 0, 1)]
    # a 262144-token request: 16384 full blocks + 3 × cdiv(8192 + 8192, 16)
    assert plan.blocks_per_request(262_144, 8192) == 16384 + 3 * 1024
    for old in ("0.9.2", "0.10.1", "0.13.0"):
        d = Deployment(tp=4, engine_version=old)
        assert kv_plan(spec, d, ranks(d)[0], "bfloat16").layout == "uniform", old
    d = Deployment(tp=4, engine_version="0.14.0")
    assert kv_plan(spec, d, ranks(d)[0], "bfloat16").layout == "hybrid"


def test_vision_tower_tp_sharding() -> None:
    spec = load_model("llama-4-scout-17b-16e")
    dep = Deployment(tp=4)
    got = sum(t.bytes for t in rank_weights(spec, dep, None, ranks(dep)[0], "sm90")
              if t.group in ("vision tower", "mm projector"))
    h, inter = 1408, 5632
    sharded = (34 * (3 * h * h + 3 * h + h * h + inter * h + inter + h * inter)
               + 3 * 14 * 14 * h + inter * 4096 + 4096 * 4096 + 4096 * H)
    whole = 34 * (h + h + 4 * h) + h + 577 * h + 4 * h  # row biases, LayerNorms, embeddings
    assert got == 2 * (sharded // 4 + whole)


def test_bad_no_rope_layers_is_refused() -> None:
    cfg = _scout()
    cfg["text_config"]["no_rope_layers"] = [1, 0, 2]
    with pytest.raises(ConfigError, match="no_rope_layers"):
        spec_from_config(cfg)


def test_text_only_llama4_for_causal_lm() -> None:
    """A text-only checkpoint (``Llama4ForCausalLM``, model_type ``llama4_text``, as fine-tunes
    of Scout ship): the same layers, no tower."""
    text = dict(_scout()["text_config"])
    text.update(architectures=["Llama4ForCausalLM"], tie_word_embeddings=False)
    spec = spec_from_config(text)
    assert (spec.family, spec.architecture) == ("llama4_text", "Llama4ForCausalLM")
    assert unsharded_total(spec, None) == 2 * (SCOUT_PARAMS - _vision())
