"""Configs bundled so that more of the calibration logs in ``tests/data/published.json`` run:
each new checkpoint's weight bytes counted by hand from its config (or held to the log's own
load figure), and each one's relation to an already-bundled config stated and checked.

Sources: each config's ``_source`` and the rows of ``tests/data/published.json`` that name the
checkpoint (their ``source`` threads).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from weight_helpers import bundled_config, rank_weight_bytes

from memprof.base.units import GiB
from memprof.core.deployment import Deployment, ranks
from memprof.core.estimate import estimate
from memprof.core.models import load_model
from memprof.core.models.load import hf_ids, spec_from_config
from memprof.core.models.quant_config import quant_from_flag
from memprof.core.weights import rank_weights

_config = bundled_config


def _rank_bytes(model: str, arch: str = "sm90", version: str = "0.11.0", tp: int = 1) -> int:
    return rank_weight_bytes(model, arch, version, tp)


# --- Qwen/Qwen3-VL-30B-A3B-Instruct (published row 160) ------------------------------------------

def _qwen3_vl_moe_params(cfg: dict[str, Any]) -> int:
    """Parameters of a Qwen3-VL MoE checkpoint by hand from its config: the text decoder
    (untied embeddings and head, q/k norms, router, routed experts) and the vision tower as
    HF's Qwen3-VL builds it (Conv3d patch embedding with bias, learned position embedding,
    LayerNorm blocks, the merger and one deepstack merger per deepstack index)."""
    t, v = cfg["text_config"], cfg["vision_config"]
    h, hd, heads, kv = t["hidden_size"], t["head_dim"], t["num_attention_heads"], t[
        "num_key_value_heads"]
    e, mi = t["num_experts"], t["moe_intermediate_size"]
    layer = (h * heads * hd + 2 * h * kv * hd + heads * hd * h + 2 * hd + 2 * h
             + e * h + e * 3 * mi * h)
    text = t["num_hidden_layers"] * layer + 2 * t["vocab_size"] * h + h
    vh, vi, out = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]
    block = 4 * vh + (vh * 3 * vh + 3 * vh) + (vh * vh + vh) + (vh * vi + vi) + (vi * vh + vh)
    merged = vh * v["spatial_merge_size"] ** 2

    def merger(norm_dim: int) -> int:
        return 2 * norm_dim + merged * merged + merged + merged * out + out

    vision = (v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 * vh + vh
              + v["num_position_embeddings"] * vh + v["depth"] * block + merger(vh)
              + len(v["deepstack_visual_indexes"]) * merger(merged))
    return int(text + vision)


def test_qwen3_vl_30b_a3b_resolves_by_its_hf_id() -> None:
    assert hf_ids()["qwen/qwen3-vl-30b-a3b-instruct"][1] == "qwen3-vl-30b-a3b-instruct"


def test_qwen3_vl_30b_a3b_weights_are_the_hand_count() -> None:
    params = _qwen3_vl_moe_params(_config("qwen3-vl-30b-a3b-instruct"))
    assert params == 31_070_754_032
    assert _rank_bytes("Qwen/Qwen3-VL-30B-A3B-Instruct") == 2 * params  # bf16


def test_qwen3_vl_30b_a3b_builds_vllms_m_rope_cache() -> None:
    """The config's M-RoPE section (text_config.rope_scaling, as the Qwen3-VL family states it)
    makes vLLM build MRotaryEmbedding, whose cos/sin cache spans 4 × max_position_embeddings:
    262144 × 4 positions × 128 × 2 B (bf16) a rank, in the load figure."""
    assert "mrope_section" in _config("qwen3-vl-30b-a3b-instruct")["text_config"]["rope_scaling"]
    e = estimate("qwen3-vl-30b-a3b-instruct", Deployment(engine_version="0.11.0", tp=4),
                 gpu_name="H100")
    comps = {c.name: c.bytes for c in e.ranks[0].components}
    assert comps["RoPE cos/sin cache default ×4 (M-RoPE)"] == 262_144 * 4 * 128 * 2


# --- meta-llama/Llama-4-Scout-17B-16E-Instruct (published row 118) -------------------------------

def test_scout_instruct_has_the_base_shapes_and_its_own_context() -> None:
    inst, base = _config("llama-4-scout-17b-16e-instruct"), _config("llama-4-scout-17b-16e")
    shape_keys = ("hidden_size", "intermediate_size", "intermediate_size_mlp", "head_dim",
                  "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                  "num_local_experts", "num_experts_per_tok", "interleave_moe_layer_step",
                  "attention_chunk_size", "vocab_size", "rope_scaling", "rope_theta")
    for k in shape_keys:
        assert inst["text_config"][k] == base["text_config"][k], k
    assert {k: v for k, v in inst["vision_config"].items() if k != "torch_dtype"} == \
        base["vision_config"]
    # the one field that keeps it a file of its own: the Instruct checkpoint's 10M context
    assert inst["text_config"]["max_position_embeddings"] == 10_485_760
    assert base["text_config"]["max_position_embeddings"] == 262_144


def test_scout_instruct_weights_are_the_base_checkpoint_s() -> None:
    assert hf_ids()["meta-llama/llama-4-scout-17b-16e-instruct"][1] == \
        "llama-4-scout-17b-16e-instruct"
    for tp in (1, 2):
        assert _rank_bytes("meta-llama/Llama-4-Scout-17B-16E-Instruct", tp=tp) == \
            _rank_bytes("meta-llama/Llama-4-Scout-17B-16E", tp=tp)
    # 108,641,793,536 parameters in bf16 (tests/test_family_llama4.py holds the base to it)
    assert _rank_bytes("meta-llama/Llama-4-Scout-17B-16E-Instruct") == 2 * 108_641_793_536
    # the 10M-token context reaches the RoPE cache vLLM sizes by max_position_embeddings
    # (get_rope(max_position=...)): 40× the base checkpoint's at any max_model_len
    dep = Deployment(engine_version="0.11.0", tp=4, max_model_len=32768)

    def rope(model: str) -> int:
        e = estimate(model, dep, gpu_name="H100")
        return sum(c.bytes for c in e.ranks[0].components if c.name.startswith("RoPE"))

    assert rope("llama-4-scout-17b-16e-instruct") == 40 * rope("llama-4-scout-17b-16e") > 0


# --- deepseek-ai/DeepSeek-V3.2(-Exp) (published rows 12 and 13) ----------------------------------

def test_v32_exp_resolves_to_the_bundled_v32() -> None:
    assert hf_ids()["deepseek-ai/deepseek-v3.2-exp"][1] == "deepseek-v3.2"
    note = str(_config("deepseek-v3.2")["_hf_ids_note"])
    assert "index_topk 2048" in note and "DeepseekV32ForCausalLM" in note


def test_v32_weights_are_v3_s_plus_the_indexer() -> None:
    # The same 61-layer MLA/MoE checkpoint as DeepSeek-V3 (every shape field equal) plus one
    # lightning indexer per layer, as vLLM's deepseek_v2.py Indexer builds it: wq_b
    # [64·128, q_lora_rank] and wk [128, hidden] fp8 with 128×128 block scales (fp32),
    # k_norm LayerNorm(128) weight and bias, weights_proj [64, hidden] unquantised (bf16).
    v32, v3 = _config("deepseek-v3.2"), _config("deepseek-v3")
    for k in ("hidden_size", "num_hidden_layers", "q_lora_rank", "kv_lora_rank", "vocab_size",
              "n_routed_experts", "moe_intermediate_size", "intermediate_size",
              "first_k_dense_replace", "num_attention_heads"):
        assert v32[k] == v3[k], k
    h, ql, n, d = (int(v32[k]) for k in ("hidden_size", "q_lora_rank", "index_n_heads",
                                         "index_head_dim"))

    def blocks(rows: int, cols: int) -> int:
        return -(-rows // 128) * -(-cols // 128)

    indexer = (n * d * ql + 4 * blocks(n * d, ql) + d * h + 4 * blocks(d, h) + 2 * d * 2
               + n * h * 2)
    layers = int(v32["num_hidden_layers"])
    assert _rank_bytes("deepseek-ai/DeepSeek-V3.2-Exp") - _rank_bytes("deepseek-v3") == \
        layers * indexer


# --- --quantization bitsandbytes on an unquantised checkpoint (published row 122) ----------------

def _bnb4_tensor(out: int, inn: int) -> int:
    """One linear weight quantised in flight by vLLM's bitsandbytes loader: nf4 packed two per
    byte, one uint8 absmax per 64 values, the nested fp32 absmax per 256 of those, and the
    state's constants (256-value nested code, fp32 offset, 16-value nf4 code), all fp32."""
    blocks = -(-out * inn // 64)
    return out * inn // 2 + blocks + 4 * -(-blocks // 256) + 4 * 256 + 4 + 4 * 16


def test_bitsandbytes_flag_quantises_every_linear_to_nf4_with_double_quant() -> None:
    spec = load_model("qwen2.5-7b-instruct")
    q = quant_from_flag("bitsandbytes", spec)
    assert q is not None
    assert (q.method, q.bits, q.group_size, q.strategy, q.double_quant, q.source) == \
        ("bnb4", 4, 64, "nf4", True, "flag")
    # a checkpoint that declares bitsandbytes keeps its own quantization_config
    cfg = {**_config("qwen2.5-7b-instruct"), "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "fp4",
        "bnb_4bit_use_double_quant": False}}
    pre = spec_from_config(cfg, name="pre-quantised")
    kept = quant_from_flag("bitsandbytes", pre)
    assert kept is not None and (kept.strategy, kept.double_quant) == ("fp4", False)


def test_qwen25_7b_bitsandbytes_weights_are_the_hand_count_and_the_logged_load() -> None:
    # Every on-disk linear (q, k, v, o, gate, up, down) quantised on its own; embeddings, the
    # untied lm_head, norms and the q/k/v biases stay bf16.
    cfg = _config("qwen2.5-7b-instruct")
    h, inter, layers, v = (int(cfg[k]) for k in ("hidden_size", "intermediate_size",
                                                 "num_hidden_layers", "vocab_size"))
    heads, kv = int(cfg["num_attention_heads"]), int(cfg["num_key_value_heads"])
    hd = h // heads
    linears = [(h, h), (kv * hd, h), (kv * hd, h), (h, h), (inter, h), (inter, h), (h, inter)]
    per_layer = (sum(_bnb4_tensor(o, i) for o, i in linears)
                 + 2 * (h + 2 * kv * hd) + 2 * 2 * h)
    hand = layers * per_layer + 2 * 2 * v * h + 2 * h
    spec = load_model("qwen2.5-7b-instruct")
    dep = Deployment(engine_version="0.7.3", quantization="bitsandbytes")
    got = sum(t.bytes for t in rank_weights(spec, dep, quant_from_flag("bitsandbytes", spec),
                                            ranks(dep)[0], "sm89"))
    # memprof counts the state's constants once per fused linear (qkv, gate_up), vLLM once
    # per on-disk tensor: a few KiB per layer
    assert 0 <= hand - got < layers * 4 * 1100
    # vLLM issue #13882 (RTX 4060, v0.7.3.dev): "Loading model weights took 5.2032 GB" (GiB)
    e = estimate("qwen2.5-7b-instruct", Deployment(engine_version="0.7.3",
                                                   quantization="bitsandbytes",
                                                   max_model_len=4096), gpu_name="RTX-4060")
    assert abs(e.weights_bytes_max / GiB - 5.2032) / 5.2032 < 0.005


# --- meta-llama/Meta-Llama-3-8B (published rows 115 and 116) -------------------------------------

def test_llama3_8b_weights_are_the_hand_count() -> None:
    # bf16 parameters by hand from the config; the same shapes as Llama-3.1-8B, whose index
    # total_size 16,060,522,496 B tests/test_calibration_checkpoints.py holds memprof to
    cfg = _config("meta-llama-3-8b")
    h, layers, heads, kv, inter, v = (int(cfg[k]) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "intermediate_size", "vocab_size"))
    hd = h // heads
    per_layer = h * (heads + 2 * kv) * hd + heads * hd * h + 3 * inter * h + 2 * h
    params = layers * per_layer + 2 * v * h + h
    assert 2 * params == 16_060_522_496
    assert hf_ids()["meta-llama/meta-llama-3-8b"][1] == "meta-llama-3-8b"
    for tp in (1, 2):
        assert _rank_bytes("meta-llama/Meta-Llama-3-8B", tp=tp) == \
            _rank_bytes("meta-llama/Llama-3.1-8B", tp=tp)
    assert _rank_bytes("meta-llama/Meta-Llama-3-8B") == 2 * params
    assert load_model("meta-llama/Meta-Llama-3-8B").max_position_embeddings == 8192


# --- the published rows these configs un-refuse ------------------------------------------------

_ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}


@pytest.mark.parametrize(("row_id", "failed"), [
    (12, False),   # DeepSeek-V3.2-Exp, SGLang, 8× B200 DP attention (deepseek-v3.2 alias)
    (13, False),   # the same launch before the PR
    (118, True),   # Llama-4-Scout Instruct, 2× H100 NVL at 0.99: weights alone overfill a card
    (122, True),   # Qwen2.5-7B bnb-4bit on an 8 GB RTX 4060: no room for one KV block
    (160, False),  # Qwen3-VL-30B-A3B on one H100 at 0.92
])
def test_the_unrefused_rows_run_and_predict_the_logged_start(row_id: int, failed: bool) -> None:
    from test_published_distribution import outcome

    row = _ROWS[row_id]
    assert bool(row["observed"].get("startup_failed") or row["observed"].get("oom")) is failed
    o = outcome(row)
    assert o.refused is None, o.refused
    assert o.verdict == (failed, failed)
