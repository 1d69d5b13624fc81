"""Qwen3.5 / Qwen3.6 (``Qwen3_5ForConditionalGeneration``, ``Qwen3_5MoeForConditionalGeneration``)
from the bundled verbatim configs of Qwen/Qwen3.5-27B and Qwen/Qwen3.5-35B-A3B: the layer layout,
the weights by hand and against the checkpoints' published parameter counts, the Gated DeltaNet
state (fp32 recurrent state from the config's ``mamba_ssm_dtype``), the unified block, and the
refusals. Layout: vLLM ``model_executor/models/qwen3_5.py`` (0.17.0 / 0.18.0 / 0.33.0; see the
family module's docstring).

Published parameter counts (the HF API's ``safetensors.total``, which counts the one MTP layer
vLLM does not load):

- 27B: 27,781,427,952 — a public model report of Qwen3.6-27B that lists every tensor of its
  15 safetensors shards ("参数总量: 27,781,427,952", search-index file id 62633829536), whose
  config.json it prints has the same shape fields as the bundled Qwen3.5-27B one; its ``mtp.*``
  tensors are listed one by one (counted below).
- 35B-A3B: 35,951,822,704 for Qwen/Qwen3.6-35B-A3B (the same shape fields as Qwen3.5-35B-A3B),
  and 35,107,181,936 for a fine-tune of it without the MTP module (a public model card found by a
  code index, search-index file id 61454383397): the MTP module is their difference,
  844,640,768, which the hand count below reproduces.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from memprof.base.errors import BadInput, ConfigError
from memprof.base.units import GiB
from memprof.core.deployment import Deployment, ranks, validate
from memprof.core.kvcache import capacity, kv_plan
from memprof.core.models import bundled_models, load_model, spec_from_config
from memprof.core.terms.rope_cache import rope_caches
from memprof.core.weights import rank_weights
from memprof.core.weights.vision import GROUP, tower_params
from tests.cli_helpers import completed

DENSE, MOE = "qwen3.5-27b", "qwen3.5-35b-a3b"
V = 248320


def _config(name: str) -> dict[str, object]:
    cfg = json.loads(bundled_models()[name].read_text())
    assert isinstance(cfg, dict)
    return cfg


def _rank_bytes(name: str, tp: int, *, tower: bool = True) -> int:
    """Weight bytes of rank 0 (without the vision tower's unless ``tower``)."""
    spec = load_model(name)
    dep = Deployment(tp=tp)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90")
               if tower or t.group != GROUP)


def _gdn(h: int, k_heads: int, v_heads: int, conv: int, tp: int) -> tuple[int, int]:
    """(bf16, fp32) elements of one Gated DeltaNet layer on one rank (head dims 128)."""
    key, value = k_heads * 128, v_heads * 128
    bf16 = (h * (2 * key + 2 * value) // tp  # in_proj_qkvz = in_proj_qkv + in_proj_z
            + h * 2 * v_heads // tp  # in_proj_ba = in_proj_b + in_proj_a
            + (2 * key + value) // tp * conv  # conv1d
            + v_heads // tp  # dt_bias
            + 128  # gated norm
            + value // tp * h)  # out_proj
    return bf16, v_heads // tp  # A_log: fp32 in vLLM (bf16 in the checkpoint)


def _attention(h: int, heads: int, kv: int, tp: int) -> int:
    hd = 256
    return (2 * heads * hd // tp * h  # q and its output gate
            + 2 * max(1, kv // tp) * hd * h  # k, v
            + heads * hd // tp * h + 2 * hd)  # o_proj, q/k norms


# --- layout --------------------------------------------------------------------------------


def test_dense_layers_from_the_config() -> None:
    spec = load_model(DENSE)
    assert (spec.family, spec.architecture, spec.num_layers, spec.hidden_size) == (
        "qwen3_5", "Qwen3_5ForConditionalGeneration", 64, 5120)
    full = [layer.index for layer in spec.layers if layer.attention.mixer is None]
    assert full == list(range(3, 64, 4))
    a = spec.layers[3].attention
    assert (a.num_heads, a.num_kv_heads, a.head_dim, a.qk_norm, a.output_gate) == (
        24, 4, 256, True, True)
    m = spec.layers[0].attention.mixer
    assert m is not None
    assert (m.kind, m.num_heads, m.num_k_heads, m.head_k_dim, m.head_v_dim, m.conv_kernel,
            m.config_ssm_dtype) == ("gdn", 48, 16, 128, 128, 4, "float32")
    assert {(layer.mlp.kind, layer.mlp.intermediate_size) for layer in spec.layers} == {
        ("dense", 17408)}
    assert not spec.mtp_layers and not spec.tie_word_embeddings
    assert spec.vision is not None and spec.vision.deepstack_levels == 0


def test_moe_layers_from_the_config() -> None:
    """Every layer is MoE (vLLM picks ``Qwen3NextSparseMoeBlock`` by the text ``model_type``,
    not by ``decoder_sparse_step``)."""
    spec = load_model(MOE)
    assert (spec.family, spec.architecture, spec.num_layers, spec.hidden_size) == (
        "qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", 40, 2048)
    assert [layer.index for layer in spec.layers if layer.attention.mixer is None] == list(
        range(3, 40, 4))
    mlp = spec.layers[0].mlp
    assert (mlp.kind, mlp.num_experts, mlp.top_k, mlp.moe_intermediate_size,
            mlp.shared_intermediate_size, mlp.shared_expert_gate) == (
        "moe", 256, 8, 512, 512, True)
    assert all(layer.mlp is mlp for layer in spec.layers)
    cfg = _config(MOE)
    text = cfg["text_config"]
    assert isinstance(text, dict)
    # a stated decoder_sparse_step does not thin the MoE layers (vLLM never reads it here)
    spec2 = spec_from_config({**cfg, "text_config": {**text, "decoder_sparse_step": 2}})
    assert all(layer.mlp.kind == "moe" for layer in spec2.layers)


def test_partial_rope_from_rope_parameters() -> None:
    """``partial_rotary_factor`` 0.25 is stated only inside ``rope_parameters``."""
    spec = load_model(DENSE)
    [cache] = rope_caches(spec, list(spec.layers), "bfloat16")
    assert (cache.positions, cache.rotary_dim) == (262_144, 64)


# --- weights -------------------------------------------------------------------------------


def _dense_by_hand(tp: int) -> int:
    h, layers, n_full = 5120, 64, 16
    gdn_bf16, gdn_fp32 = _gdn(h, 16, 48, 4, tp)
    mlp = 3 * (17408 // tp) * h
    bf16 = ((layers - n_full) * gdn_bf16 + n_full * _attention(h, 24, 4, tp)
            + layers * (mlp + 2 * h) + 2 * (V // tp) * h + h)  # embed, lm_head, final norm
    return 2 * bf16 + 4 * (layers - n_full) * gdn_fp32


def _moe_by_hand(tp: int) -> int:
    h, layers, n_full = 2048, 40, 10
    gdn_bf16, gdn_fp32 = _gdn(h, 16, 32, 4, tp)
    moe = 256 * 3 * (512 // tp) * h + 3 * (512 // tp) * h + 256 * h + h
    bf16 = ((layers - n_full) * gdn_bf16 + n_full * _attention(h, 16, 2, tp)
            + layers * (moe + 2 * h) + 2 * (V // tp) * h + h)
    return 2 * bf16 + 4 * (layers - n_full) * gdn_fp32


def test_language_model_weights_by_hand() -> None:
    for tp in (1, 2, 4):
        assert _rank_bytes(DENSE, tp, tower=False) == _dense_by_hand(tp)
        assert _rank_bytes(MOE, tp, tower=False) == _moe_by_hand(tp)


def _tower_by_hand(out_hidden: int) -> int:
    """Qwen3-VL's tower as the report lists its ``model.visual.*`` tensors: 27 blocks of 1152
    (two biased LayerNorms, qkv and proj, fc1/fc2 of 4304, all biased), the merger (LayerNorm,
    4608 → 4608 → ``out_hidden``), the Conv3d patch embedding (3·2·16·16 inputs, biased) and
    the 2304-row position table."""
    block = 3456 * 1152 + 3456 + 1152 * 1152 + 1152 + 2 * 4304 * 1152 + 4304 + 1152 + 4 * 1152
    merger = 2 * 1152 + 4608 * 4608 + 4608 + out_hidden * 4608 + out_hidden
    return 27 * block + merger + 1152 * 1536 + 1152 + 2304 * 1152


def test_vision_tower_by_hand() -> None:
    assert _tower_by_hand(5120) == 460_730_096
    for name, out_hidden in ((DENSE, 5120), (MOE, 2048)):
        vision = load_model(name).vision
        assert vision is not None
        assert tower_params(vision) == _tower_by_hand(out_hidden)
        assert _rank_bytes(name, 1) - _rank_bytes(name, 1, tower=False) == 2 * _tower_by_hand(
            out_hidden)


def _mtp_dense() -> int:
    """The 27B's ``mtp.*`` tensors as the report lists them (vLLM skips them)."""
    h = 5120
    return (h * 2 * h  # mtp.fc [5120, 10240]
            + 3 * 17408 * h  # mlp
            + 12288 * h + 2 * 1024 * h + h * 6144 + 2 * 256  # self_attn + q/k norms
            + 5 * h)  # input/post norms, mtp.norm, pre_fc_norm_embedding/_hidden


def _mtp_moe() -> int:
    h = 2048
    return (h * 2 * h + _attention(h, 16, 2, 1)
            + 256 * 3 * 512 * h + 3 * 512 * h + 256 * h + h  # experts, shared, gates
            + 5 * h)


def test_weights_against_the_published_parameter_counts() -> None:
    """The checkpoint's parameters less its MTP layer, 2 bytes each (A_log is fp32 in vLLM:
    2 extra bytes per value head of each GDN layer), within 0.5% (exact here)."""
    assert _mtp_dense() == 424_699_392
    assert _mtp_moe() == 35_951_822_704 - 35_107_181_936 == 844_640_768
    for name, total, mtp, a_log in ((DENSE, 27_781_427_952, _mtp_dense(), 48 * 48),
                                    (MOE, 35_951_822_704, _mtp_moe(), 30 * 32)):
        by_count = 2 * (total - mtp)
        got = _rank_bytes(name, 1)
        assert abs(got - by_count) / by_count < 0.005
        assert got == by_count + 2 * a_log


def _rank_bytes_mtp(name: str, tp: int) -> int:
    """Weight bytes of rank 0 with the MTP drafter loaded (--num-speculative-tokens 2,
    --speculative-method mtp)."""
    spec = load_model(name, speculative_mtp=True)
    dep = Deployment(tp=tp, num_speculative_tokens=2)
    validate(dep, spec)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90"))


def test_mtp_layer_only_under_speculative_decoding() -> None:
    """qwen3_5_mtp.py builds ``mtp_num_hidden_layers`` decoder layers with
    ``layer_type="full_attention"`` and the target's MLP, after the target's layers."""
    for name, kind in ((DENSE, "dense"), (MOE, "moe")):
        assert not load_model(name).mtp_layers
        spec = load_model(name, speculative_mtp=True)
        [mtp] = spec.mtp_layers
        assert (mtp.index, mtp.is_mtp, mtp.mlp.kind) == (len(spec.layers), True, kind)
        assert mtp.attention.mixer is None and mtp.attention.output_gate


def test_mtp_weights_are_the_checkpoints_mtp_tensors() -> None:
    """The drafter adds the checkpoint's ``mtp.*`` tensors (counted above against the
    published parameter counts), bf16, and neither embedding nor lm_head (the target's, shared
    by the proposer); at TP 2 fc (ColumnParallelLinear), attention and MLP split, norms whole."""
    assert _rank_bytes_mtp(DENSE, 1) - _rank_bytes(DENSE, 1) == 2 * _mtp_dense()
    assert _rank_bytes_mtp(MOE, 1) - _rank_bytes(MOE, 1) == 2 * _mtp_moe()
    h = 5120
    by_hand = (h * 2 * h // 2 + 3 * 17408 // 2 * h + _attention(h, 24, 4, 2) + 5 * h)
    assert _rank_bytes_mtp(DENSE, 2) - _rank_bytes(DENSE, 2) == 2 * by_hand
    h = 2048
    moe = 256 * 3 * 256 * h + 3 * 256 * h + 256 * h + h
    by_hand = h * 2 * h // 2 + _attention(h, 16, 2, 2) + moe + 5 * h
    assert _rank_bytes_mtp(MOE, 2) - _rank_bytes(MOE, 2) == 2 * by_hand


def test_fp8_checkpoint_keeps_mtp_fc_in_bf16() -> None:
    """Qwen3.5-27B-FP8 lists ``mtp.fc`` in ``modules_to_not_convert``: [5120, 10240] bf16."""
    spec = load_model("qwen3.5-27b-fp8", speculative_mtp=True)
    dep = Deployment(tp=1, num_speculative_tokens=1)
    [fc] = [t for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90")
            if t.module == "mtp.fc"]
    assert fc.bytes == 5120 * 10240 * 2


def test_mtp_attention_joins_the_full_attention_group() -> None:
    """The MTP layer's attention is a 17th full-attention layer of the 27B: vLLM's uniform-page
    grouping (v1/core/kv_cache_utils.py) makes groups of 17 layers (the full-attention one and
    three Gated DeltaNet ones), so a block holds 17 pages and a token 17 layers' K and V."""
    spec = load_model(DENSE, speculative_mtp=True)
    dep = Deployment(tp=1, num_speculative_tokens=2, engine_version="0.18.0")
    validate(dep, spec)
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    page = 784 * 2 * 4 * 256 * 2
    assert plan.block_bytes == 17 * page
    assert plan.bytes_per_token == 17 * 2 * 4 * 256 * 2


def test_mtp_without_the_config_block_is_refused() -> None:
    cfg = _config(DENSE)
    text = cfg["text_config"]
    assert isinstance(text, dict)
    cfg["text_config"] = {k: v for k, v in text.items() if k != "mtp_num_hidden_layers"}
    spec = spec_from_config(cfg, with_mtp=True)
    with pytest.raises(BadInput, match="no MTP layer"):
        validate(Deployment(tp=1, num_speculative_tokens=1), spec)


# --- the KV cache ---------------------------------------------------------------------------


def _state_bytes(tp: int) -> int:
    """27B, one GDN layer, one request: conv (3, (2·16·128 + 48·128)/tp) in bf16, recurrent
    (48/tp, 128, 128) in fp32 (``mamba_ssm_dtype``)."""
    return 3 * (2 * 16 * 128 + 48 * 128) // tp * 2 + 48 // tp * 128 * 128 * 4


def test_recurrent_state_is_fp32_and_sets_the_block() -> None:
    spec = load_model(DENSE)
    dep = Deployment(tp=1, max_model_len=262_144, engine_version="0.18.0")
    validate(dep, spec)
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    state = _state_bytes(1)
    assert state == 3_207_168
    per_token = 2 * 4 * 256 * 2  # K and V of 4 KV heads, bf16
    assert plan.block_size == 16 * -(-state // (16 * per_token)) == 784
    assert {s.page_bytes for s in plan.layers} == {784 * per_token}


def test_fp8_kv_block_and_padding_as_a_published_log_prints_them() -> None:
    """A Qwen3.x-27B of these shapes with fp8 KV (row 139 of tests/data/published.json, a
    club-3090 start-up on one RTX A6000) logs "Setting attention block size to 1568 tokens" and
    "Padding mamba page size by 0.13%"."""
    spec = load_model(DENSE)
    dep = Deployment(tp=1, kv_cache_dtype="fp8_e4m3")
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    per_token = 2 * 4 * 256
    assert plan.block_size == 1568
    page = 1568 * per_token
    assert {s.page_bytes for s in plan.layers} == {page}
    assert f"{100 * (page - _state_bytes(1)) / _state_bytes(1):.2f}" == "0.13"


# --- refusals --------------------------------------------------------------------------------


def test_a_config_without_the_linear_attention_sizes_is_refused() -> None:
    cfg = _config(DENSE)
    text = dict(cfg["text_config"])  # type: ignore[arg-type]
    del text["linear_num_value_heads"]
    with pytest.raises(ConfigError, match="linear_num_value_heads"):
        spec_from_config({**cfg, "text_config": text})


def test_a_moe_config_without_experts_is_refused() -> None:
    cfg = _config(MOE)
    text = dict(cfg["text_config"])  # type: ignore[arg-type]
    del text["num_experts"]
    with pytest.raises(ConfigError, match="num_experts"):
        spec_from_config({**cfg, "text_config": text})


def test_an_unknown_ssm_dtype_is_refused() -> None:
    cfg = _config(DENSE)
    text = {**cfg["text_config"], "mamba_ssm_dtype": "int8"}  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match="mamba_ssm_dtype"):
        spec_from_config({**cfg, "text_config": text})


def test_a_release_before_the_model_is_refused() -> None:
    """vLLM 0.16.0 has no qwen3_5.py: the vision-language model is refused there."""
    spec = load_model(DENSE)
    with pytest.raises(BadInput, match=r"0\.17\.0"):
        validate(Deployment(tp=1, engine_version="0.16.0"), spec)
    validate(Deployment(tp=1, engine_version="0.17.0"), spec)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return completed(["estimate", *args])


@pytest.mark.parametrize("name", [DENSE, MOE])
def test_the_cli_estimates_it(name: str) -> None:
    p = _cli("--model", name, "--gpu", "H200", "--format", "json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["summary"]["verdict"] == "fits"
    assert out["model"]["family"] == load_model(name).family
    assert any("MTP" in n for n in out["summary"]["notes"])


def test_fp8_kv_blocks_of_a_published_35b_log() -> None:
    """Rows 109 and 110 of tests/data/published.json (vLLM 0.24.0, a local NVFP4 checkpoint of
    Qwen3.6-35B-A3B, the 35B-A3B shapes, fp8 KV, max_model_len 131,072 on one RTX 5090): from
    the logged available KV memory the family's page gives the blocks that reproduce the logged
    concurrency and tokens to the digit, once vLLM's 'align' mamba cache mode (prefix caching on:
    two state pages per state group per request, ``MambaSpec.max_memory_usage_bytes``) is
    counted by hand here (memprof counts it from --enable-prefix-caching:
    tests/test_mamba_cache_mode.py)."""
    spec = load_model(MOE)
    dep = Deployment(tp=1, kv_cache_dtype="fp8", max_model_len=131_072, engine_version="0.24.0")
    plan = kv_plan(spec, dep, ranks(dep)[0], spec.dtype)
    state = 3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4  # bf16 conv, fp32 recurrent
    assert plan.block_size == 2096 and state == 2096 * 2 * 2 * 256  # no padding
    for gib, concurrency, tokens in ((6.01, "4.35", 569_878), (5.98, "4.33", 567_978)):
        blocks = capacity(plan, int(gib * GiB), 131_072, 8192).num_gpu_blocks
        per_request = -(-131_072 // 2096) + 3 * 2  # full-attention blocks + 3 state groups × 2
        assert f"{blocks / per_request:.2f}" == concurrency
        assert int(blocks / per_request * 131_072) == tokens
