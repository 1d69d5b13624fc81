"""Qwen/Qwen2.5-0.5B bundled from its verbatim HF ``config.json`` (issue 24: the log hunt's A10G
and many small-card logs run this checkpoint): the parameters counted by hand from the config,
the checkpoint's tensor count read off its safetensors header in public, and memprof's TP1 rank
weights, all equal.

494,032,768 parameters: a public read of the checkpoint's safetensors header prints 'tensors 290
dtypes {'BF16'}' and 'params 494032768' for the base and the instruct model alike (identical
layout), and the same count is what transformers reports for Qwen2ForCausalLM of this config
in public run records (sources: ``configs/models/qwen2.5-0.5b.json`` ``_source``)."""

from __future__ import annotations

from typing import Any

from weight_helpers import bundled_config, rank_weight_bytes

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.models.load import hf_ids

PARAMS = 494_032_768
TENSORS = 290


def _hand_count(c: dict[str, Any]) -> tuple[int, int]:
    """(parameters, tensors) of Qwen2ForCausalLM by hand: q/k/v with biases, o_proj without,
    a SwiGLU MLP, two RMSNorms a layer, the final norm and one embedding (tied lm_head)."""
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = h // heads  # 64
    layer = (h * heads * hd + heads * hd          # q_proj weight + bias
             + 2 * (h * kv * hd + kv * hd)        # k_proj, v_proj weight + bias
             + heads * hd * h                     # o_proj
             + 3 * c["intermediate_size"] * h     # gate, up, down
             + 2 * h)                             # input / post-attention RMSNorm
    assert c["tie_word_embeddings"] is True
    params = c["num_hidden_layers"] * layer + c["vocab_size"] * h + h
    tensors = c["num_hidden_layers"] * 12 + 2  # 7 + 3 + 2 a layer; embedding, final norm
    return params, tensors


def test_the_bundled_config_is_the_checkpoints() -> None:
    c = bundled_config("qwen2.5-0.5b")
    assert c["_hf_ids"] == ["Qwen/Qwen2.5-0.5B"]
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
            c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"]) == (
        896, 24, 14, 2, 4864, 151936)
    assert c["torch_dtype"] == "bfloat16" and c["use_sliding_window"] is False
    assert "060db6499f32faf8b98477b0a26969ef7d8b9987" in c["_source"]


def test_hand_count_is_the_checkpoint() -> None:
    assert _hand_count(bundled_config("qwen2.5-0.5b")) == (PARAMS, TENSORS)


def test_rank_weights_at_tp1_are_the_checkpoint() -> None:
    assert hf_ids()["qwen/qwen2.5-0.5b"][1] == "qwen2.5-0.5b"
    assert rank_weight_bytes("qwen2.5-0.5b") == 2 * PARAMS
    e = estimate("Qwen/Qwen2.5-0.5B", Deployment(max_model_len=4096), gpu_name="A10G")
    weights = [c for c in e.ranks[0].components if c.category == "weights"]
    extra = [c for c in weights if c.name.startswith(("RoPE cos/sin cache", "allocator rounding"))]
    assert e.weights_bytes_max - sum(c.bytes for c in extra) == 2 * PARAMS


def test_kv_per_token_by_hand() -> None:
    # 24 layers × 2 KV heads × 64 × (K and V) × 2 B = 12,288 B a token
    e = estimate("qwen2.5-0.5b", Deployment(max_model_len=4096), gpu_name="A10G")
    kv = e.ranks[0].kv
    assert kv.request_bytes == 4096 * 24 * 2 * 64 * 2 * 2  # one 4,096-token request: 48 MiB
    assert kv.kv_cache_bytes == kv.tokens * 24 * 2 * 64 * 2 * 2
