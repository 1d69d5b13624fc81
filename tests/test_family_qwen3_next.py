"""Qwen3-Next (``Qwen3NextForCausalLM``) from its bundled config, end to end through vLLM's hybrid
KV-cache manager: the layer layout, the weights by hand, the Gated DeltaNet state per request,
the unified block and the KV figures of a published start-up log, and the refusals.

The published check is a vLLM v0.10.2 start-up of Qwen3-Next-80B-A3B-Instruct, TP=2 on H200,
bf16, max_model_len 262,144, max_num_batched_tokens 8,192 (``vllm.entrypoints.openai.api_server
--model .../Qwen3-Next-80B-A3B-Instruct --tensor-parallel-size 2``; a user's start-up log kept
in a public GitHub repository whose name the code index that found it does not give; the same
log as tests/test_hybrid_kv_groups.py; not a row of tests/data/published.json, which asks
for an https source):

    [config.py:390] Setting attention block size to 544 tokens to ensure that attention page
        size is >= mamba page size.
    [config.py:411] Padding mamba page size by 1.49% to ensure that mamba page size and
        attention page size are exactly equal.
    [gpu_model_runner.py:2392] Model loading took 74.2812 GiB and 215.831224 seconds
    [gpu_worker.py:298] Available KV cache memory: 44.59 GiB
    [kv_cache_utils.py:1028] GPU KV cache size: 973,760 tokens
    [kv_cache_utils.py:1032] Maximum concurrency for 262,144 tokens per request: 14.77x

Layout: vLLM ``model_executor/models/qwen3_next.py`` (v0.11.0; see the family module's
docstring).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from memprof.base.errors import BadInput, ConfigError
from memprof.base.units import GiB
from memprof.core.deployment import Deployment, ranks, validate
from memprof.core.estimate import estimate
from memprof.core.kvcache import capacity, kv_plan, logged_tokens_per_group
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.terms.rope_cache import rope_caches
from memprof.core.weights import rank_weights
from tests.cli_helpers import completed

NAME = "qwen3-next-80b-a3b-instruct"
H, LAYERS, V = 2048, 48, 151936
HEADS, KV, HD = 16, 2, 256
K_HEADS, V_HEADS, K_DIM, V_DIM, CONV = 16, 32, 128, 128, 4
E, MOE_I, SHARED_I = 512, 512, 512
FULL = [i for i in range(LAYERS) if (i + 1) % 4 == 0]  # full_attention_interval 4
LOGGED_WEIGHTS = 74.2812 * GiB
LOGGED_KV_BYTES = 47_878_721_024  # "Current kv cache memory in use" of the same start-up


def _config() -> dict[str, object]:
    cfg = json.loads(bundled_models()[NAME].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _gdn_elements(tp: int) -> tuple[int, int]:
    """(bf16, fp32) elements of one Gated DeltaNet layer on one rank."""
    key, value = K_HEADS * K_DIM, V_HEADS * V_DIM
    bf16 = (H * (2 * key + 2 * value) // tp  # in_proj_qkvz
            + H * 2 * V_HEADS // tp  # in_proj_ba
            + (2 * key + value) // tp * CONV  # conv1d
            + V_HEADS // tp  # dt_bias
            + V_DIM  # gated norm
            + value // tp * H)  # out_proj
    return bf16, V_HEADS // tp  # A_log fp32


def _attention_elements(tp: int) -> int:
    q_and_gate = 2 * HEADS * HD // tp * H
    kv = 2 * max(1, KV // tp) * HD * H
    return q_and_gate + kv + HEADS * HD // tp * H + 2 * HD  # o_proj, q/k norms


def _moe_elements(tp: int) -> int:
    return (E * 3 * (MOE_I // tp) * H  # routed experts
            + 3 * (SHARED_I // tp) * H  # shared expert
            + E * H + H)  # router and shared_expert_gate (replicated)


def _rank_bytes_by_hand(tp: int) -> int:
    gdn_bf16, gdn_fp32 = _gdn_elements(tp)
    n_full = len(FULL)
    bf16 = ((LAYERS - n_full) * gdn_bf16 + n_full * _attention_elements(tp)
            + LAYERS * (_moe_elements(tp) + 2 * H)  # + two RMSNorms a layer
            + 2 * (V // tp) * H + H)  # embed_tokens, lm_head (vocab a multiple of 64), norm
    return 2 * bf16 + 4 * (LAYERS - n_full) * gdn_fp32


def _rank_bytes(tp: int) -> int:
    spec = load_model(NAME)
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90"))


def test_layers_from_the_config() -> None:
    spec = load_model(NAME)
    assert (spec.family, spec.architecture, spec.num_layers) == (
        "qwen3_next", "Qwen3NextForCausalLM", LAYERS)
    full = [layer.index for layer in spec.layers if layer.attention.mixer is None]
    assert full == FULL == [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47]
    a = spec.layers[3].attention
    assert (a.num_heads, a.num_kv_heads, a.head_dim, a.qk_norm, a.output_gate, a.qkv_bias) == (
        HEADS, KV, HD, True, True, False)
    m = spec.layers[0].attention.mixer
    assert m is not None
    assert (m.kind, m.num_heads, m.num_k_heads, m.head_k_dim, m.head_v_dim, m.conv_kernel) == (
        "gdn", V_HEADS, K_HEADS, K_DIM, V_DIM, CONV)
    mlp = spec.layers[0].mlp
    assert (mlp.kind, mlp.num_experts, mlp.top_k, mlp.moe_intermediate_size,
            mlp.shared_intermediate_size, mlp.shared_expert_gate) == (
        "moe", E, 10, MOE_I, SHARED_I, True)
    assert all(layer.mlp is mlp for layer in spec.layers)
    assert not spec.mtp_layers


def test_weights_by_hand_and_against_the_log() -> None:
    assert _rank_bytes(1) == _rank_bytes_by_hand(1)
    assert _rank_bytes(2) == _rank_bytes_by_hand(2)
    # the log's "Model loading took 74.2812 GiB" at TP2, within 0.5%
    assert abs(_rank_bytes(2) - LOGGED_WEIGHTS) / LOGGED_WEIGHTS < 0.005
    params = _rank_bytes_by_hand(1) // 2  # bf16 (the fp32 A_log is 36 × 32 elements)
    assert 79e9 < params < 81e9  # "80B total parameters" (the Qwen3-Next model card)


def test_kv_figures_of_the_log_from_the_family() -> None:
    spec = load_model(NAME)
    dep = Deployment(tp=2, max_model_len=262_144, engine_version="0.10.2")
    validate(dep, spec)
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    # state per layer per request at TP2: conv (3, 8192/2) + recurrent (32/2, 128, 128), bf16
    state = 3 * (2 * K_HEADS * K_DIM + V_HEADS * V_DIM) // 2 * 2 + V_HEADS // 2 * K_DIM * V_DIM * 2
    assert state == 548_864
    per_token = 2 * 1 * HD * 2  # K and V of one KV head per rank, bf16
    assert plan.block_size == 16 * -(-state // (16 * per_token)) == 544  # "544 tokens"
    assert {s.page_bytes for s in plan.layers} == {544 * per_token}  # state padded 1.49%
    assert f"{100 * (544 * per_token - state) / state:.2f}" == "1.49"
    assert sorted((n, g) for n, _b, _w, g in plan.group_blocks) == [("full", 1), ("state", 3)]
    cap = capacity(plan, LOGGED_KV_BYTES, dep.max_model_len, 8192)
    assert cap.num_gpu_blocks == 7162
    assert f"{cap.max_concurrency:.2f}" == "14.77"
    assert cap.tokens == logged_tokens_per_group(plan, cap.num_gpu_blocks) == 973_760


def test_estimate_against_the_log() -> None:
    """The whole estimate at the log's deployment: weights within 0.5% of the logged load, the
    KV budget within 2% of the logged 44.59 GiB (the budget's other terms are not this family's;
    it lands 1.1% low)."""
    e = estimate(NAME, Deployment(tp=2, max_model_len=262_144, engine_version="0.10.2"),
                 gpu_name="H200")
    r = e.ranks[0]
    assert r.kv is not None and e.verdict == "fits"
    assert abs(r.available_kv_bytes - 44.59 * GiB) / (44.59 * GiB) < 0.02


def test_fp8_kv_halves_the_attention_page_and_doubles_the_block() -> None:
    spec = load_model(NAME)
    dep = Deployment(tp=2, kv_cache_dtype="fp8")
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    # the state stays bf16 (mamba_cache_dtype auto): 548,864 B over 512 B/token → 16 × 67
    assert plan.block_size == 16 * -(-548_864 // (16 * 512)) == 1072
    assert {s.page_bytes for s in plan.layers} == {1072 * 512}


def test_a_smaller_block_size_is_raised() -> None:
    """``--block-size 128`` is below the derived 544: vLLM raises it (``cache_config.block_size
    < attn_block_size``)."""
    spec = load_model(NAME)
    dep = Deployment(tp=2, block_size=128)
    validate(dep, spec)
    assert kv_plan(spec, dep, ranks(dep)[0], spec.dtype).block_size == 544


def test_partial_rope_of_the_full_attention_layers() -> None:
    spec = load_model(NAME)
    [cache] = rope_caches(spec, list(spec.layers), "bfloat16")
    assert (cache.positions, cache.rotary_dim) == (262_144, HD // 4)  # partial_rotary_factor


def test_layer_types_when_the_config_states_them() -> None:
    cfg = {**_config(), "layer_types": ["linear_attention", "full_attention"] * 24}
    spec = spec_from_config(cfg)
    assert [layer.index for layer in spec.layers if layer.attention.mixer is None] == list(
        range(1, 48, 2))
    with pytest.raises(ConfigError, match="layer type"):
        spec_from_config({**cfg, "layer_types": ["linear_attention", "mamba"] * 24})


def test_a_config_without_the_linear_attention_sizes_is_refused() -> None:
    cfg = _config()
    del cfg["linear_num_value_heads"]
    with pytest.raises(ConfigError, match="linear_num_value_heads"):
        spec_from_config(cfg)


def test_a_tp_above_the_value_heads_is_refused() -> None:
    """``gated_delta_net_state_shape`` divides the 32 value heads by TP (vLLM ``divide``)."""
    spec = load_model(NAME)
    dep = Deployment(tp=64)
    with pytest.raises(BadInput, match="linear-attention"):
        kv_plan(spec, dep, ranks(dep)[0], spec.dtype)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return completed(["estimate", "--model", NAME, *args])


def test_sglang_is_refused_not_guessed() -> None:
    p = _cli("--gpu", "H200", "--tp", "2", "--engine", "sglang")
    err = p.stderr.splitlines()
    assert p.returncode == 2 and len(err) == 2, p.stderr
    assert err[0].startswith("error: ") and "recurrent-state layers" in err[0]
    assert err[1] == "hint: use --engine vllm"


def test_the_hybrid_manager_cannot_be_disabled() -> None:
    p = _cli("--gpu", "H200", "--tp", "2", "--disable-hybrid-kv-cache-manager")
    err = p.stderr.splitlines()
    assert p.returncode == 2 and len(err) == 2 and "cannot unify" in err[0], p.stderr
