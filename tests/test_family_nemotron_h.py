"""Nemotron-H (``NemotronHForCausalLM``) from its bundled config: the blocks of
``hybrid_override_pattern``, the weights by hand, the Mamba-2 state per request and the unified
block of vLLM's hybrid KV-cache manager, the SSM dtype by release, and the refusals.

Layout: vLLM ``model_executor/models/nemotron_h.py`` (v0.11.0) and ``MambaMixer2``
(``model_executor/layers/mamba/mamba_mixer2.py``, v0.11.2); see the family module.

Published weights: vLLM issue #23230 (https://github.com/vllm-project/vllm/issues/23230),
NVIDIA-Nemotron-Nano-9B-v2 on vLLM 0.10.1, one L40S:

    INFO 08-20 03:10:00 [model_runner.py:1112] Model loading took 16.5557 GiB and 2.803817 seconds

Its config is built here from the fields public quotations of that config.json give (the
56-block pattern, hidden 4480, 40 heads / 8 KV heads of 128, MLP 15680, Mamba 128 heads × 80,
8 groups, state 128, conv 4, vocabulary 131072, untied embeddings); tolerance 0.5%.
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
from tests.cli_helpers import completed

NAME = "nemotron-h-8b-base-8k"
H, V, LAYERS = 4096, 131072, 52
PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
HEADS, KV, HD, INTER = 32, 8, 128, 21504
M_HEADS, M_HEAD, GROUPS, STATE, CONV = 128, 64, 8, 128, 4


def _config() -> dict[str, object]:
    cfg = json.loads(bundled_models()[NAME].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _rank_bytes(spec_or_name: object, tp: int) -> int:
    spec = load_model(spec_or_name) if isinstance(spec_or_name, str) else spec_or_name
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90"))


def _by_hand(tp: int, *, h: int, v: int, pattern: str, heads: int, kv: int, hd: int,
             inter: int, m_heads: int, m_head: int, groups: int, state: int) -> int:
    inner = m_heads * m_head
    conv_dim = inner + 2 * groups * state
    mamba_bf16 = ((inner + conv_dim + m_heads) * h // tp  # in_proj
                  + conv_dim // tp * (CONV + 1)  # conv1d weight and bias
                  + 2 * m_heads // tp  # D, dt_bias
                  + inner // tp  # gated norm (TP-split)
                  + inner // tp * h)  # out_proj
    mamba_fp32 = m_heads // tp  # A
    attention = (heads * hd // tp + 2 * kv * hd // tp) * h + heads * hd // tp * h
    mlp = 2 * inter // tp * h  # up_proj + down_proj, no gate
    n = {b: pattern.count(b) for b in "M*-"}
    bf16 = (n["M"] * mamba_bf16 + n["*"] * attention + n["-"] * mlp
            + len(pattern) * h  # one norm per block
            + 2 * (v // tp) * h + h)  # embeddings, lm_head, final norm
    return 2 * bf16 + 4 * n["M"] * mamba_fp32


def test_blocks_from_the_pattern() -> None:
    spec = load_model(NAME)
    assert (spec.family, spec.num_layers) == ("nemotron_h", LAYERS)
    kinds = "".join("M" if (m := layer.attention.mixer) and m.kind == "mamba2"
                    else "-" if m else "*" for layer in spec.layers)
    assert kinds == PATTERN
    assert (PATTERN.count("M"), PATTERN.count("*"), PATTERN.count("-")) == (24, 4, 24)
    mlp = spec.layers[1].mlp
    assert (mlp.kind, mlp.intermediate_size, mlp.gated, mlp.activation) == (
        "dense", INTER, False, "relu2")
    assert spec.layers[0].mlp.kind == "none" and spec.layers[7].mlp.kind == "none"
    m = spec.layers[0].attention.mixer
    assert m is not None
    assert (m.num_heads, m.head_v_dim, m.num_k_heads, m.head_k_dim, m.conv_kernel,
            m.intermediate_size, m.conv_bias, m.proj_bias) == (
        M_HEADS, M_HEAD, GROUPS, STATE, CONV, M_HEADS * M_HEAD, True, False)


def test_weights_by_hand() -> None:
    dims = dict(h=H, v=V, pattern=PATTERN, heads=HEADS, kv=KV, hd=HD, inter=INTER,
                m_heads=M_HEADS, m_head=M_HEAD, groups=GROUPS, state=STATE)
    assert _rank_bytes(NAME, 1) == _by_hand(1, **dims)
    assert _rank_bytes(NAME, 2) == _by_hand(2, **dims)
    assert 7.9e9 < _by_hand(1, **dims) / 2 < 8.2e9  # "8B"


def test_nano_9b_v2_weights_against_the_published_load() -> None:
    pattern = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
    cfg = {**_config(), "hybrid_override_pattern": pattern, "num_hidden_layers": 56,
           "hidden_size": 4480, "intermediate_size": 15680, "num_attention_heads": 40,
           "num_key_value_heads": 8, "head_dim": 128, "mamba_num_heads": 128,
           "mamba_head_dim": 80, "max_position_embeddings": 131072}
    spec = spec_from_config(cfg, name="nemotron-nano-9b-v2")
    got = _rank_bytes(spec, 1)
    assert got == _by_hand(1, h=4480, v=V, pattern=pattern, heads=40, kv=8, hd=128,
                           inter=15680, m_heads=128, m_head=80, groups=8, state=128)
    logged = 16.5557 * GiB
    assert abs(got - logged) / logged < 0.005


def _state_bytes(ssm_bytes: int, tp: int = 1) -> int:
    conv = (CONV - 1) * (M_HEADS * M_HEAD + 2 * GROUPS * STATE) // tp * 2  # model dtype
    return conv + M_HEADS // tp * M_HEAD * STATE * ssm_bytes


@pytest.mark.parametrize(("version", "ssm_bytes"), [("0.12.0", 2), ("0.13.0", 2)])
def test_block_unified_to_the_mamba_page(version: str, ssm_bytes: int) -> None:
    """The config declares no mamba_ssm_cache_dtype: up to 0.12.0 "auto" is the model dtype
    (bf16), from 0.13.0 it is float16 — 2 bytes either way."""
    spec = load_model(NAME)
    dep = Deployment(engine_version=version)
    validate(dep, spec)
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    per_token = 2 * KV * HD * 2
    state = _state_bytes(ssm_bytes)
    assert state == 2_158_592
    assert plan.block_size == 16 * -(-state // (16 * per_token)) == 528
    # 4 attention layers (one group), 24 Mamba layers (six groups of four), no spec for MLPs
    assert sorted((n, g) for n, _b, _w, g in plan.group_blocks) == [("full", 1), ("state", 6)]
    cap = capacity(plan, 40 * GiB, 8192, 8192)
    assert cap.num_gpu_blocks == 40 * GiB // (4 * 528 * per_token)
    assert cap.blocks_per_request == -(-8192 // 528) + 6
    assert cap.tokens == cap.num_gpu_blocks // 7 * 528


def test_fp32_ssm_state_from_the_config_from_0_13_0() -> None:
    spec = spec_from_config({**_config(), "mamba_ssm_cache_dtype": "float32"}, name="n")
    per_token = 2 * KV * HD * 2
    before = kv_plan(spec, Deployment(engine_version="0.12.0"),
                     ranks(Deployment())[0], spec.dtype)
    after = kv_plan(spec, Deployment(engine_version="0.13.0"),
                    ranks(Deployment())[0], spec.dtype)
    assert before.block_size == 16 * -(-_state_bytes(2) // (16 * per_token)) == 528
    assert after.block_size == 16 * -(-_state_bytes(4) // (16 * per_token)) == 1040


def test_attention_has_no_rope_cache() -> None:
    spec = load_model(NAME)
    assert rope_caches(spec, list(spec.layers), "bfloat16") == []


def test_unknown_blocks_and_latent_moe_are_refused() -> None:
    cfg = {**_config(), "hybrid_override_pattern": "M*-X", "num_hidden_layers": 4}
    with pytest.raises(ConfigError, match="does not model"):
        spec_from_config(cfg)
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        spec_from_config({**_config(), "num_hidden_layers": 51})
    nano3 = json.loads(bundled_models()[NANO3].read_text())
    with pytest.raises(ConfigError, match="latent MoE"):
        spec_from_config({**nano3, "moe_latent_size": 1024})
    del nano3["n_routed_experts"]
    with pytest.raises(ConfigError, match="n_routed_experts"):
        spec_from_config(nano3)


def test_sglang_is_refused() -> None:
    p = completed(["estimate", "--model", NAME, "--gpu", "H100", "--engine", "sglang"])
    err = p.stderr.splitlines()
    assert p.returncode == 2 and len(err) == 2, p.stderr
    assert "recurrent-state layers" in err[0] and err[1] == "hint: use --engine vllm"


def test_releases_before_the_v1_hybrid_manager_are_refused() -> None:
    """0.10.1 sends a model with inner state to V0 (``_is_v1_supported_oracle``, "V1 mamba
    models are unoptimized"); the Mamba cache there is not modelled."""
    from memprof.base.errors import BadInput

    spec = load_model(NAME)
    with pytest.raises(BadInput, match=r"from 0\.10\.2"):
        validate(Deployment(engine_version="0.10.1"), spec)
    validate(Deployment(engine_version="0.10.2"), spec)


# NVIDIA-Nemotron-3-Nano-30B-A3B: E blocks (NemotronHMoE, vLLM v0.11.2): an fp32 gate and fp32
# e_score_correction_bias, non-gated experts (is_act_and_mul=False: w13 is the up projection
# alone), a non-gated shared expert; its config states mamba_ssm_cache_dtype float32.
NANO3 = "nemotron-3-nano-30b-a3b"
N3_H, N3_PATTERN = 2688, "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"


def _nano3_by_hand() -> int:
    inner, conv_dim = 64 * 64, 64 * 64 + 2 * 8 * 128
    mamba = (inner + conv_dim + 64) * N3_H + conv_dim * (CONV + 1) + 2 * 64 + inner + inner * N3_H
    attention = (32 * 128 + 2 * 2 * 128) * N3_H + 32 * 128 * N3_H
    moe = 128 * 2 * 1856 * N3_H + 2 * 3712 * N3_H  # up + down per expert, shared up + down
    bf16 = 23 * mamba + 6 * attention + 23 * moe + 52 * N3_H + 2 * V * N3_H + N3_H
    fp32 = 23 * 64 + 23 * (128 * N3_H + 128)  # A; gate weight and e_score_correction_bias
    return 2 * bf16 + 4 * fp32


def test_nano3_moe_blocks() -> None:
    spec = load_model(NANO3)
    assert [i for i, b in enumerate(N3_PATTERN) if b == "*"] == [5, 12, 19, 26, 33, 42]
    m = spec.layers[1].mlp
    assert (m.kind, m.num_experts, m.top_k, m.moe_intermediate_size, m.shared_intermediate_size,
            m.gated, m.router_fp32, m.e_score_correction_bias) == (
        "moe", 128, 6, 1856, 3712, False, True, True)
    assert spec.layers[1].attention.mixer is not None
    assert spec.layers[1].attention.mixer.kind == "none"


def test_nano3_weights_against_the_checkpoint_size() -> None:
    """By hand, and within 0.5% of the 63.2 GB the checkpoint's 13 safetensors shards take
    (the quoted brief; 0.1 GB rounding)."""
    got = _rank_bytes(NANO3, 1)
    assert got == _nano3_by_hand()
    assert abs(got - 63.2e9) / 63.2e9 < 0.005


@pytest.mark.parametrize(("version", "block"), [("0.12.0", 1072), ("0.13.0", 2096)])
def test_nano3_fp32_ssm_state_by_release(version: str, block: int) -> None:
    """conv (3, 4096 + 2·8·128) bf16 + SSM (64, 64, 128): bf16 up to 0.12.0, the config's
    float32 from 0.13.0; one KV head pair of 128 per token is 1024 B."""
    spec = load_model(NANO3)
    dep = Deployment(engine_version=version, max_model_len=131072)
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    ssm = 4 if version == "0.13.0" else 2
    state = 3 * 6144 * 2 + 64 * 64 * 128 * ssm
    assert plan.block_size == 16 * -(-state // (16 * 1024)) == block
