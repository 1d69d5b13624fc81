"""KV bytes per token, pages, groups, blocks and tokens against hand calculations."""

from dataclasses import replace

import pytest

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment, ranks
from memprof.core.kvcache import capacity, kv_plan, max_fitting_model_len, tq_slot_bytes
from memprof.core.models import load_model


def per_token(name: str, dep: Deployment, arch: str = "sm90", rank: int = 0) -> int:
    spec = load_model(name)
    return kv_plan(spec, dep, ranks(dep)[rank], "bfloat16", arch).bytes_per_token


@pytest.mark.parametrize(("kv", "expected"), [
    ("auto", 262_144),  # 64 layers × 8 heads × (128 + 128) × 2 B
    ("fp8", 131_072),
    ("turboquant_k8v4", 110_464),  # 60 × 8 × 196 + 4 × 8 × 512
])
def test_qwen3_32b_kv_bytes_per_token(kv: str, expected: int) -> None:
    assert per_token("qwen3-32b", Deployment(kv_cache_dtype=kv)) == expected


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16, 32, 64, 128])
@pytest.mark.parametrize(("kv", "expected"), [("auto", 70_272), ("fp8", 35_136)])
def test_deepseek_r1_mla_kv_is_replicated_at_every_tp(tp: int, kv: str, expected: int) -> None:
    # 61 layers × (512 + 64) × 2 B (bf16) or 1 B (fp8): one latent head on every TP rank
    assert per_token("deepseek-r1", Deployment(tp=tp, kv_cache_dtype=kv)) == expected


@pytest.mark.parametrize(("preset", "slot"), [
    ("turboquant_k8v4", 196), ("turboquant_4bit_nc", 134), ("turboquant_k3v4_nc", 118),
    ("turboquant_3bit_nc", 102)])
def test_turboquant_slots(preset: str, slot: int) -> None:
    assert tq_slot_bytes(preset, 128) == slot


def test_gqa_kv_heads_split_then_replicated() -> None:
    assert per_token("llama-3.1-70b", Deployment(tp=8)) == 80 * 1 * 256 * 2
    assert per_token("llama-3.1-70b", Deployment(tp=16)) == 80 * 1 * 256 * 2


def test_blocks_and_tokens_like_vllm() -> None:
    # internals.md §1.6 worked example: Llama-3-8B-like, 60 GiB of KV, block 16 → 30,720 blocks
    spec = load_model("llama-3.1-8b")
    dep = Deployment()
    plan = kv_plan(spec, dep, ranks(dep)[0], "bfloat16")
    assert plan.block_bytes == 32 * 16 * 8 * 256 * 2
    cap = capacity(plan, 60 * 2**30, 8192, 8192)
    assert cap.num_gpu_blocks == 30_720
    assert cap.tokens == 30_720 * 16  # "GPU KV cache size" = blocks · mml / cdiv(mml, 16)
    assert cap.max_concurrency == pytest.approx(30_720 / 512)


def test_sliding_window_layers_capped_per_request() -> None:
    # gpt-oss: 18 full + 18 sliding (window 128) layers, same page → 2 groups of 18 layers
    # (vLLM 0.25.0: one batch in flight; 0.26.0 on, tests/test_kv_admission.py)
    spec = load_model("gpt-oss-120b")
    dep = Deployment(engine_version="0.25.0")
    plan = kv_plan(spec, dep, ranks(dep)[0], "bfloat16")
    page = 16 * 8 * 128 * 2
    assert plan.layout == "hybrid" and plan.block_bytes == 18 * page
    assert plan.bytes_per_token == 18 * 8 * 128 * 2  # only full layers grow with context
    # one 131072-token request: 8192 full blocks + cdiv(min(127 + 8192, L), 16) + 1 SWA blocks
    assert plan.blocks_per_request(131072, 8192) == 8192 + 520 + 1


def test_deepseek_v4_packed_block_stride() -> None:
    # deepseek_v4.md §5.4: full_mla stack dominates; Flash fp8 indexer 1,002,240 B per 256 tokens
    spec = load_model("deepseek-v4-flash")
    dep = Deployment()
    plan = kv_plan(spec, dep, ranks(dep)[0], "bfloat16")
    assert plan.block_bytes == 21 * 37_440 + 21 * 8_640 + 20 * 1_728 == 1_002_240
    pro = load_model("deepseek-v4-pro")
    assert kv_plan(pro, dep, ranks(dep)[0], "bfloat16").block_bytes == 1_435_968
    # decode-held extra blocks per request at steady state: 2·3 + 3 + 17 = 26 (§5.4, q ≈ 1),
    # with one batch in flight (vLLM 0.25.0 admission; 0.26.0 on: tests/test_kv_admission.py)
    plan = replace(plan, in_flight_batches=1)
    assert plan.blocks_per_request(256 * 100, 1) == 100 + 26


def test_max_fitting_model_len_is_the_largest_that_fits() -> None:
    spec = load_model("llama-3.1-8b")
    dep = Deployment()
    plan = kv_plan(spec, dep, ranks(dep)[0], "bfloat16")
    avail = 1000 * plan.block_bytes
    best = max_fitting_model_len(plan, avail, 8192, 131072)
    assert best == 16000
    assert plan.blocks_per_request(best + 1, 8192) * plan.block_bytes > avail


def test_bad_kv_dtype_combinations() -> None:
    with pytest.raises(BadInput, match="standard attention"):
        per_token("deepseek-r1", Deployment(kv_cache_dtype="turboquant_k8v4"))
    with pytest.raises(BadInput, match="fp8_ds_mla"):
        per_token("deepseek-r1", Deployment(kv_cache_dtype="fp8_ds_mla"))
