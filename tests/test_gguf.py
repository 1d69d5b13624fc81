"""GGUF checkpoints (``memprof.core.weights.gguf``): GGML block sizes, what vLLM v0.11.0 keeps
quantised (linears, embeddings and lm_head alike), the padding of merged linears to their
widest shard, and the refusal of llama.cpp's per-layer mixes."""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.models.gguf_types import GGML_TYPES, VLLM_TYPES
from memprof.core.weights.gguf import gguf_bytes, module_type, row_bytes
from tests.test_did_you_mean import call, error_and_hint


def _dep(quant: dict[str, object], **kw: object) -> Deployment:
    return Deployment(max_model_len=8192,
                      hf_overrides=json.dumps({"quantization_config": quant}), **kw)


def _tensors(e: object) -> dict[str, int]:
    return {t.module: t.bytes_each for t in e.ranks[0].tensors}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("t", "block", "size"), [
    # ggml-common.h: block_q4_0 = fp16 d + 16 B of nibbles; block_q8_0 = fp16 d + 32 int8;
    # block_q4_K = fp16 d, dmin + 12 B scales + 128 B nibbles; block_q5_K adds 32 B high bits;
    # block_q6_K = 128 B low + 64 B high bits + 16 int8 scales + fp16 d; block_iq4_xs =
    # fp16 d + u16 scales_h + 4 B scales_l + 128 B
    ("Q4_0", 32, 18), ("Q8_0", 32, 34), ("Q4_K", 256, 144), ("Q5_K", 256, 176),
    ("Q6_K", 256, 210), ("Q2_K", 256, 84), ("Q3_K", 256, 110), ("IQ4_XS", 256, 136),
    ("IQ2_XXS", 256, 66), ("F16", 1, 2), ("BF16", 1, 2), ("F32", 1, 4)])
def test_ggml_block_sizes(t: str, block: int, size: int) -> None:
    assert GGML_TYPES[t] == (block, size)
    assert row_bytes(t, 4096) == 4096 // block * size


def test_vllm_runs_a_subset_and_rows_must_be_whole_blocks() -> None:
    assert set(VLLM_TYPES) <= set(GGML_TYPES) and "TQ1_0" not in VLLM_TYPES
    with pytest.raises(ConfigError, match="not whole 256-element blocks"):
        row_bytes("Q4_K", 4096 + 128)
    assert gguf_bytes(10, 512, "Q8_0") == (10 * 16 * 34, "10×16×34B Q8_0 blocks (GGUF qweight)")


def test_a_q8_0_llama_is_sized_from_its_blocks_embeddings_included() -> None:
    # Llama-3.1-8B: hidden 4096, intermediate 14336, 32 heads, 8 KV heads × 128, vocab 128256
    e = estimate("llama-3.1-8b", _dep({"quant_method": "gguf", "file_type": "Q8_0"}),
                 gpu_name="H100")
    got = _tensors(e)
    row = 4096 // 32 * 34  # every matrix has 4096 inputs except down_proj
    assert got["model.embed_tokens"] == got["lm_head"] == 128256 * row
    assert got["model.layers.*.self_attn.qkv_proj(q)"] == 4096 * row
    assert got["model.layers.*.self_attn.qkv_proj(kv)"] == 2 * 1024 * row
    assert got["model.layers.*.mlp.gate_up_proj"] == 2 * 14336 * row
    assert got["model.layers.*.mlp.down_proj"] == 4096 * (14336 // 32 * 34)
    assert got["model.layers.*.input_layernorm"] == 4096 * 2  # norms: the model dtype
    matrices = 2 * 128256 * row + 32 * (
        (4096 + 2048 + 4096 + 2 * 14336) * row + 4096 * (14336 // 32 * 34))
    gguf_total = sum(t.bytes_each * t.count for t in e.ranks[0].tensors
                     if "GGUF" in t.formula)
    assert gguf_total == matrices


def test_merged_linears_are_padded_to_their_widest_shard() -> None:
    types = {"attn_v": "Q6_K", "ffn_down": "Q6_K", "output": "Q6_K", "*": "Q4_K"}
    e = estimate("llama-3.1-8b", _dep({"quant_method": "gguf", "tensor_types": types}),
                 gpu_name="H100")
    got = _tensors(e)
    q4k, q6k = 4096 // 256 * 144, 4096 // 256 * 210
    # q, k stored Q4_K but padded to v's Q6_K rows (gguf.py _create_padded_weight_param)
    assert got["model.layers.*.self_attn.qkv_proj(q)"] == 4096 * q6k
    assert got["model.layers.*.self_attn.o_proj"] == 4096 * q4k
    assert got["model.layers.*.mlp.gate_up_proj"] == 2 * 14336 * q4k
    assert got["model.layers.*.mlp.down_proj"] == 4096 * (14336 // 256 * 210)
    assert got["lm_head"] == 128256 * q6k and got["model.embed_tokens"] == 128256 * q4k
    assert module_type((("attn_q", "Q4_K"), ("*", "Q8_0")), "x.self_attn.qkv_proj(q)") == "Q8_0"


def test_tensor_parallel_splits_gguf_rows_by_whole_blocks() -> None:
    e = estimate("llama-3.1-8b", _dep({"quant_method": "gguf", "file_type": "Q6_K"}, tp=2),
                 gpu_name="H100")
    got = _tensors(e)
    assert got["model.layers.*.mlp.down_proj"] == 4096 * (7168 // 256 * 210)
    assert got["model.layers.*.self_attn.qkv_proj(q)"] == 2048 * (4096 // 256 * 210)


@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q5_K_M", "Q4_K_S", "Q3_K_M", "IQ2_XS", "Q4_0"])
def test_llama_cpp_mixes_are_refused_with_the_way_out(ftype: str) -> None:
    over = json.dumps({"quantization_config": {"quant_method": "gguf", "file_type": ftype}})
    error, hint = error_and_hint(["estimate", "-m", "llama-3.1-8b", "--gpu", "H100",
                                  "--hf-overrides", over])
    assert error.startswith(f"error: GGUF file type {ftype} ")
    assert "llama-quant.cpp" in error
    assert "tensor_types" in hint and "gguf-dump" in hint


@pytest.mark.parametrize(("quant", "message"), [
    ({"quant_method": "gguf"}, "neither tensor_types nor file_type"),
    ({"quant_method": "gguf", "tensor_types": {"*": "Q9_K"}}, "unknown GGML type 'Q9_K'"),
    ({"quant_method": "gguf", "tensor_types": {"*": "TQ1_0"}}, "does not run GGUF TQ1_0"),
    ({"quant_method": "gguf", "tensor_types": {"attn_q": "Q4_K"}}, "gives no type for"),
])
def test_bad_gguf_configs_are_bad_input(quant: dict[str, object], message: str) -> None:
    error, _hint = error_and_hint(["estimate", "-m", "llama-3.1-8b", "--gpu", "H100",
                                   "--hf-overrides", json.dumps({"quantization_config": quant})])
    assert message in error


def test_the_flag_alone_asks_for_the_types() -> None:
    error, hint = error_and_hint(["estimate", "-m", "qwen3-0.6b", "-q", "gguf"])
    assert error == "error: --quantization gguf needs the GGUF file's tensor types"
    assert "file_type" in hint
    code, _, err = call("estimate", "-m", "llama-3.1-8b", "--gpu", "H100", "-q", "gguf",
                        "--hf-overrides", json.dumps({"quantization_config": {
                            "quant_method": "gguf", "file_type": "BF16"}}))
    assert code in (0, 1), err


def test_an_8_expert_q8_0_file_keeps_experts_quantised_and_the_router_in_the_model_dtype(
) -> None:
    # Mixtral-8x7B at TP2: experts (8, 2·7168, 4096) and (8, 4096, 7168) in Q8_0 blocks
    # (GGUFMoEMethod); the router is ReplicatedLinear(quant_config=None) in vLLM's mixtral.py
    e = estimate("mixtral-8x7b", _dep({"quant_method": "gguf", "file_type": "Q8_0"}, tp=2),
                 gpu_name="H100")
    got = _tensors(e)
    assert got["model.layers.*.mlp.gate"] == 8 * 4096 * 2
    assert got["model.layers.*.mlp.experts"] == 8 * (2 * 7168 * (4096 // 32 * 34)
                                                     + 4096 * (7168 // 32 * 34))
