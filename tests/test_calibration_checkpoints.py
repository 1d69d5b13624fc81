"""Checkpoints the calibration logs name, resolved to bundled configs: each one's weight bytes by
hand from its config against the checkpoint's safetensors index ``metadata.total_size`` (or the
log's own load figure), and the same-architecture aliases (an HF id added to another bundled
config's ``_hf_ids``) held to the fields that may differ.

Sources: each config's ``_source`` / ``_hf_ids_note`` and the rows of
``tests/data/published.json`` they un-refuse.
"""

from __future__ import annotations

import pytest
from weight_helpers import bundled_config, rank_weight_bytes

from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.models.load import hf_ids

_config = bundled_config
_rank_bytes = rank_weight_bytes


# --- Llama-3.1-8B-Instruct: the bundled llama-3.1-8b ---------------------------------------------

def test_llama31_8b_instruct_is_the_bundled_llama31_8b() -> None:
    assert hf_ids()["meta-llama/llama-3.1-8b-instruct"][1] == "llama-3.1-8b"
    note = str(_config("llama-3.1-8b")["_hf_ids_note"])
    # only the fields a tokenizer/generation change touches differ
    assert "eos_token_id" in note and "transformers_version" in note


def test_llama31_8b_weights_match_the_index_and_the_logged_load() -> None:
    # The checkpoint: bf16 parameters of the config, by hand, are the index's total_size
    # 16,060,522,496 B (quoted publicly for meta-llama/Llama-3.1-8B; the Instruct checkpoint has
    # the same tensor shapes). The log, vLLM issue #10517 (RTX 3090, V0): "Loading model weights
    # took 14.9888 GB" (GiB: V0's model_runner divides by 2**30), which adds the llama3 RoPE
    # cache (131072 positions × head_dim 128, bf16) to the checkpoint.
    h, layers, heads, kv, hd, inter, v = 4096, 32, 32, 8, 128, 14336, 128256
    per_layer = h * (heads + 2 * kv) * hd + heads * hd * h + 3 * inter * h + 2 * h
    params = layers * per_layer + 2 * v * h + h
    assert 2 * params == 16_060_522_496
    assert _rank_bytes("meta-llama/Llama-3.1-8B-Instruct", "sm86") == 2 * params
    e = estimate("meta-llama/Llama-3.1-8B-Instruct", Deployment(max_model_len=20000),
                 gpu_name="RTX-3090")
    assert abs(e.weights_bytes_max - (2 * params + 131072 * hd * 2)) / e.weights_bytes_max < 0.002
    assert abs(e.weights_bytes_max / GiB - 14.9888) / 14.9888 < 0.005


# --- gpt-oss-20b ---------------------------------------------------------------------------------

GPT_OSS_20B_TOTAL_SIZE = 13_761_264_768  # openai/gpt-oss-20b model.safetensors.index.json


def test_gpt_oss_20b_hand_count_is_the_checkpoint_index() -> None:
    cfg = _config("gpt-oss-20b")
    h, layers, heads, kv, hd = (int(str(cfg[k])) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim"))
    e, i, v = int(str(cfg["num_local_experts"])), int(str(cfg["intermediate_size"])), int(
        str(cfg["vocab_size"]))
    bf = 2
    attn = (h * heads * hd + heads * hd + 2 * (h * kv * hd + kv * hd)  # q, k, v (+ biases)
            + heads * hd * h + h + heads) * bf  # o_proj (+ bias), sinks
    router = (e * h + e) * bf
    # MXFP4 experts: e2m1 nibbles (16 bytes per 32 values) + one e8m0 scale per 32, bf16 biases
    experts = (e * 2 * i * (h // 32) * 17 + e * 2 * i * bf
               + e * h * (i // 32) * 17 + e * h * bf)
    total = layers * (attn + 2 * h * bf + router + experts) + 2 * v * h * bf + h * bf
    assert total == GPT_OSS_20B_TOTAL_SIZE


def test_gpt_oss_20b_weights_on_hopper_are_the_checkpoint_within_half_a_percent() -> None:
    # Triton MXFP4 path (vLLM >= 0.25.0: raw scales deleted): only the swizzled scale rows pad.
    got = _rank_bytes("openai/gpt-oss-20b", "sm90", "0.25.0")
    assert 0 < got - GPT_OSS_20B_TOTAL_SIZE < 0.005 * GPT_OSS_20B_TOTAL_SIZE


# --- GPUs the calibration logs ran on ------------------------------------------------------------

@pytest.mark.parametrize(("typed", "row", "mib", "arch"), [
    ("RTX 4060", "RTX-4060", 8188, "sm89"),
    ("NVIDIA GeForce RTX 4060", "RTX-4060", 8188, "sm89"),
    ("H20-3e (141 GB)", "H20-3e", 143155.9375, "sm90"),  # row 132's spelling
    ("NVIDIA H20-3e", "H20-3e", 143155.9375, "sm90"),
    ("H20", "H20", 97285, "sm90"),  # the 96 GB part stays its own row
])
def test_the_calibration_gpus_resolve(typed: str, row: str, mib: float, arch: str) -> None:
    gpu = find_gpu(typed)
    assert (gpu.name, gpu.total_bytes / (1 << 20), gpu.arch) == (row, mib, arch)


def test_the_rtx_4060_total_is_the_vllm_log_s() -> None:
    # vLLM issue #13882 (WSL): "the current vLLM instance can use total_gpu_memory (8.00GiB)"
    assert f"{find_gpu('RTX-4060').total_bytes / GiB:.2f}" == "8.00"
