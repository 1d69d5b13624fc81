"""The DeepSeek-V3 family (DeepseekV3ForCausalLM: DeepSeek-V3, DeepSeek-R1, Kimi-K2): each
bundled checkpoint's weight bytes counted by hand from its config.json, and DeepSeek-V3's held to
the bytes of its published checkpoint files.

The count follows vLLM's deepseek_v2.py (DeepseekV2MLAAttention, DeepseekV2MLP, DeepseekV2MoE)
on a block-fp8 checkpoint: every linear fp8 (1 B) with one fp32 ``weight_scale_inv`` per
128 × 128 block, norms and the embedding / lm_head bf16, the router bf16 with an fp32
``e_score_correction_bias``. memprof's rank also holds the MLA up-projection vLLM derives after
the load (``W_UK_T`` / ``W_UV``, memprof/core/weights/mla_absorption.py), which no checkpoint
stores: it is left out here.
"""

from __future__ import annotations

from typing import Any

import pytest
from weight_helpers import bundled_config

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.weights import rank_weights


def _blocks(rows: int, cols: int) -> int:
    return -(-rows // 128) * -(-cols // 128)


def _fp8(rows: int, cols: int) -> int:
    """An fp8 linear [rows, cols] and its fp32 128 × 128 block scales."""
    return rows * cols + 4 * _blocks(rows, cols)


def _layer_bytes(c: dict[str, Any], moe: bool) -> int:
    """One decoder layer: MLA (q_a, q_a_layernorm, q_b, kv_a_proj_with_mqa, kv_a_layernorm,
    kv_b, o), the two RMSNorms, and the dense MLP or the MoE (router, routed and shared
    experts)."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    ql, kl, nope, rope, vd = (c[k] for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                             "qk_rope_head_dim", "v_head_dim"))
    attn = (_fp8(ql, h) + 2 * ql + _fp8(heads * (nope + rope), ql) + _fp8(kl + rope, h)
            + 2 * kl + _fp8(heads * (nope + vd), kl) + _fp8(h, heads * vd) + 2 * 2 * h)
    if not moe:
        inter = c["intermediate_size"]
        return attn + 2 * _fp8(inter, h) + _fp8(h, inter)
    e, mi = c["n_routed_experts"], c["moe_intermediate_size"]
    expert = 2 * _fp8(mi, h) + _fp8(h, mi)
    return attn + 2 * e * h + 4 * e + (e + c["n_shared_experts"]) * expert


def _hand_bytes(c: dict[str, Any]) -> int:
    """The main model: embedding, lm_head (untied), final norm, the dense layers then MoE."""
    h, dense = c["hidden_size"], c["first_k_dense_replace"]
    return (2 * 2 * c["vocab_size"] * h + 2 * h + dense * _layer_bytes(c, moe=False)
            + (c["num_hidden_layers"] - dense) * _layer_bytes(c, moe=True))


def _checkpoint_bytes(model: str, mtp: bool = False) -> int:
    """memprof's weight tensors of the whole model on one rank, less the derived MLA copy."""
    spec = load_model(model, speculative_mtp=mtp)
    dep = Deployment()
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0])
               if "absorbed" not in t.module and "W_UK" not in t.module)


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-r1", "kimi-k2"])
def test_weights_are_the_hand_count(model: str) -> None:
    cfg = bundled_config(model)
    assert cfg["architectures"] == ["DeepseekV3ForCausalLM"]
    assert _checkpoint_bytes(model) == _hand_bytes(cfg)


def test_deepseek_v3_is_its_published_checkpoint() -> None:
    # The checkpoint's safetensors files (deepseek-ai/DeepSeek-V3 at revision afb92e1f, and
    # DeepSeek-R1 at 56d4cbbb: the same tensors) hold 688,586,727,753 bytes, as a public
    # model-facts catalog records them ("artifact_bytes", the creator repository's weight files).
    # Beside the 61 layers they hold the MTP module (num_nextn_predict_layers 1): one more MoE
    # layer, enorm and hnorm, eh_proj [H, 2H] in bf16, and its own embed_tokens, shared_head
    # norm and head, which vLLM's MTP drafter shares with the target model.
    cfg = bundled_config("deepseek-v3")
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    mtp = _layer_bytes(cfg, moe=True) + 2 * 2 * h + 2 * h * 2 * h + 2 * vocab * h + 2 * h \
        + 2 * vocab * h
    files = 688_586_727_753
    hand = _hand_bytes(cfg) + mtp
    # the rest is the files' safetensors headers (163 shards of JSON, about 12 MB)
    assert 0 < files - hand < 16_000_000
    assert abs(files - hand) / files < 0.0001
    # memprof with the MTP layer loaded (speculative decoding), its embedding and head copies
    # added: within 0.01% of the files too
    both = _checkpoint_bytes("deepseek-v3", mtp=True) + 2 * 2 * vocab * h
    assert abs(files - both) / files < 0.0001
