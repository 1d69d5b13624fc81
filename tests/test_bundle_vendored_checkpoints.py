"""Checkpoints users name that memprof used to refuse ('not a bundled model'), bundled from
verbatim copies of their HF ``config.json`` (each file's ``_source``): Qwen/Qwen3.6-27B-FP8,
deepseek-ai/DeepSeek-V3.1, moonshotai/Kimi-K2-Thinking and zai-org/GLM-4.7 (a public repository
that keeps configs under their HF ids), meta-llama/Llama-3.1-405B and mistralai/Mixtral-8x22B-
v0.1 (ai-dynamo/aiconfigurator, whose Llama-3.1-8B/70B and Mixtral copies are bundled already).

Each resolves by the id a user types, to the family its architecture names. Where a published
figure of the checkpoint is in the public sources, memprof's weights are held to it:
Llama-3.1-405B's 405,853,388,800 parameters (the Hub's safetensors total at revision b906e4dc,
as a public compute census quotes it) and Mixtral-8x22B-v0.1's 140,620,634,112 (the same total
of its community mirror, in a public model census), both bf16; Qwen3.6-27B-FP8's load figure in
calibration row 2512 (vLLM 0.27.1, 'Model loading took 27.67 GiB', text only). DeepSeek-V3.1
has DeepSeek-V3's tensors (its config differs in the FP8 scales' format only), so memprof's
weights are V3's to the byte."""

from __future__ import annotations

import pytest
from weight_helpers import bundled_config, rank_weight_bytes

from memprof.base.units import GiB
from memprof.core.models import load_model
from memprof.core.models.load import hf_ids
from tests.test_popular_checkpoint_weights import NOT_IN_CHECKPOINT, _llama_params
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
