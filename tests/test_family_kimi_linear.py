"""Kimi-Linear (``KimiLinearForCausalLM``) from its bundled config: KDA and NoPE-MLA layers, the
weights by hand, the KDA state and the unified block, and the KV figures of a published
start-up log through vLLM's hybrid KV-cache manager.

Layout: vLLM ``model_executor/models/kimi_linear.py`` and ``model_executor/layers/kda.py``
(v0.11.2); see the family module.

Published log: vLLM issue #28228 (https://github.com/vllm-project/vllm/issues/28228), row 130 of
tests/data/published.json: cyankiwi/Kimi-Linear-48B-A3B-Instruct-AWQ-4bit (the same
architecture; its AWQ weights are not this bundled checkpoint's, so only the KV figures are
checked here, from the logged KV memory), TP=2 on two RTX 3090, bf16 KV, max_model_len 120,000,
vLLM V1 of 2025-11-06 (0.11.0):

    [gpu_worker.py:349] Available KV cache memory: 2.30 GiB
    [kv_cache_utils.py:979] Add 1 padding layers, may waste at most 5.00% KV cache memory
    [kv_cache_utils.py:1229] GPU KV cache size: 75,840 tokens
    [kv_cache_utils.py:1234] Maximum concurrency for 120,000 tokens per request: 2.48x

Tolerance: the logged memory is rounded to 0.01 GiB; every value in [2.295, 2.305) GiB must give
75,840 tokens and a concurrency that rounds to 2.48 or 2.49 (the log's 2.48 needs 318 blocks,
2.2986-2.3058 GiB).
"""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import ConfigError
from memprof.base.units import GiB
from memprof.core.deployment import Deployment, ranks, validate
from memprof.core.kvcache import capacity, kv_plan
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.terms.rope_cache import rope_caches
from memprof.core.weights import rank_weights

NAME = "kimi-linear-48b-a3b-instruct"
H, V, LAYERS, HEADS = 2304, 163840, 27, 32
KDA_HEADS, KDA_DIM, CONV = 32, 128, 4
NOPE, ROPE, VDIM, RANK = 128, 64, 128, 512
E, MOE_I, DENSE_I = 256, 1024, 9216
MLA_LAYERS = [3, 7, 11, 15, 19, 23, 26]  # full_attn_layers 4 … 27, 1-based


def _config() -> dict[str, object]:
    cfg = json.loads(bundled_models()[NAME].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _rank_bytes(tp: int) -> int:
    spec = load_model(NAME)
    dep = Deployment(tp=tp, max_model_len=120_000)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90"))


def _by_hand(tp: int) -> int:
    proj = KDA_HEADS * KDA_DIM
    kda_bf16 = (3 * proj // tp * H  # q, k, v
                + 2 * KDA_DIM * H  # f_a, g_a (replicated)
                + 2 * proj // tp * KDA_DIM  # f_b, g_b
                + KDA_HEADS // tp * H  # b_proj
                + KDA_DIM  # o_norm
                + H * proj // tp)  # o_proj
    kda_fp32 = 3 * proj // tp * CONV + KDA_HEADS // tp + proj // tp  # convs, A_log, dt_bias
    mla = (HEADS * (NOPE + ROPE) // tp * H + (RANK + ROPE) * H + RANK
           + HEADS * (NOPE + VDIM) // tp * RANK + H * HEADS * VDIM // tp)
    moe_bf16 = E * 3 * (MOE_I // tp) * H + 3 * (MOE_I // tp) * H + E * H
    bf16 = (20 * kda_bf16 + 7 * mla + 26 * moe_bf16 + 3 * (DENSE_I // tp) * H
            + LAYERS * 2 * H + 2 * (V // tp) * H + H)
    return 2 * bf16 + 4 * (20 * kda_fp32 + 26 * E)  # + fp32 e_score_correction_bias


def test_layers_from_the_config() -> None:
    spec = load_model(NAME)
    assert (spec.family, spec.num_layers) == ("kimi_linear", LAYERS)
    assert [layer.index for layer in spec.layers if layer.attention.mixer is None] == MLA_LAYERS
    a = spec.layers[3].attention
    assert (a.kind, a.num_heads, a.kv_lora_rank, a.q_lora_rank, a.rope) == (
        "mla", HEADS, RANK, None, "none")
    m = spec.layers[0].attention.mixer
    assert m is not None and (m.kind, m.num_heads, m.head_k_dim, m.conv_kernel) == (
        "kda", KDA_HEADS, KDA_DIM, CONV)
    assert spec.layers[0].mlp.kind == "dense" and spec.layers[1].mlp.kind == "moe"
    assert spec.layers[1].mlp.top_k == 8 and spec.layers[1].mlp.shared_intermediate_size == MOE_I
    assert rope_caches(spec, list(spec.layers), "bfloat16") == []  # mla_use_nope


def test_weights_by_hand() -> None:
    assert _rank_bytes(1) == _by_hand(1)
    assert _rank_bytes(2) == _by_hand(2)
    assert 48e9 < _by_hand(1) / 2 < 50e9  # "48B" total parameters (the model card)


def _plan() -> object:
    spec = load_model(NAME)
    dep = Deployment(tp=2, max_model_len=120_000, max_num_batched_tokens=64_000,
                     max_num_seqs=8, gpu_memory_utilization=0.95, engine_version="0.11.0")
    validate(dep, spec)
    return kv_plan(spec, dep, ranks(dep)[0], spec.dtype)


def test_kda_state_and_unified_block() -> None:
    plan = _plan()
    # KDA state at TP2: three convs (3, 4096/2) bf16 + recurrent (16, 128, 128) fp32
    state = 3 * 3 * 2048 * 2 + 16 * KDA_DIM * KDA_DIM * 4
    per_token = (RANK + ROPE) * 2  # MLA latent, one per token, bf16
    assert plan.block_size == 64 * -(-state // (64 * per_token)) == 960  # MLA alignment 64
    assert {s.page_bytes for s in plan.layers} == {960 * per_token}
    # 7 MLA + 20 KDA layers: groups of 7, the KDA layers in three groups ("1 padding layer")
    assert sorted((n, g) for n, _b, _w, g in plan.group_blocks) == [("full", 1), ("state", 3)]
    assert plan.block_bytes == 7 * 960 * per_token


@pytest.mark.parametrize("gib", [2.2986, 2.30, 2.3049])
def test_kv_figures_of_the_log(gib: float) -> None:
    plan = _plan()
    cap = capacity(plan, int(gib * GiB), 120_000, 64_000)
    assert cap.tokens == 75_840  # blocks // 4 groups × 960
    assert cap.blocks_per_request == -(-120_000 // 960) + 3
    assert f"{cap.max_concurrency:.2f}" in ("2.48", "2.49")
    if gib < 2.3:
        assert cap.num_gpu_blocks == 318 and f"{cap.max_concurrency:.2f}" == "2.48"


def test_bad_linear_attention_configs_are_refused() -> None:
    cfg = _config()
    linear = dict(cfg["linear_attn_config"])  # type: ignore[arg-type]
    del linear["short_conv_kernel_size"]
    with pytest.raises(ConfigError, match="short_conv_kernel_size"):
        spec_from_config({**cfg, "linear_attn_config": linear})
    with pytest.raises(ConfigError, match="q_lora_rank"):
        spec_from_config({**cfg, "q_lora_rank": 1536})
    with pytest.raises(ConfigError, match="kda_layers"):
        spec_from_config({**cfg, "linear_attn_config": {**linear, "short_conv_kernel_size": 4,
                                                        "kda_layers": [0, 1]}})
