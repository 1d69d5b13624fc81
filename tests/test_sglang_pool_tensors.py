"""SGLang's KV pool tensors (``memprof/core/engines/sglang_pool.py``) against a hand count from
``mem_cache/memory_pool.py``: per layer K and V apart (MHA) or one latent buffer and one indexer
buffer (DeepSeek-V3.2), each one page longer than the pool, and the caching allocator's 2 MiB
rounding of each, which the runtime slack holds; vLLM's one tensor per layer is unchanged."""

from __future__ import annotations

from memprof.core.attention import KVLayerSpec
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_pool import pool_tensors
from memprof.core.estimate import estimate
from memprof.core.kvcache import kv_tensor_sizes
from memprof.core.terms.allocator import allocation_size

MIB2 = 2 * 1024 * 1024


def test_llama_8b_k_and_v_apart_by_hand() -> None:
    """Llama-3.1-8B, TP1: 8 KV heads × 128 × 2 B = 2,048 B a token for K and the same for V,
    32 layers; published row 405's 444,500 tokens (sglang 0.4.3: size + 1) make 64 tensors of
    444,501 × 2,048 = 910,338,048 B, each reserved as 435 × 2 MiB = 912,261,120 B."""
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", engine_version="0.4.3"),
                 gpu_name="H100")
    plan = e.ranks[0].plan
    assert plan.pool_tensors == ((2048, 2048),) * 64
    sizes = kv_tensor_sizes(plan, 444_500)
    assert sizes == [910_338_048] * 64
    assert all(allocation_size(n) == 435 * MIB2 for n in sizes)
    # the rounding "Memory pool end" shows beyond "KV size": 64 × 1,923,072 B
    assert sum(allocation_size(n) - n for n in sizes) == 64 * 1_923_072


def test_the_slack_holds_the_pool_tensors_rounding() -> None:
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", engine_version="0.4.3"),
                 gpu_name="H100")
    r = e.ranks[0]
    slack = next(c for c in r.components if c.name == "allocator slack (simulated)")
    assert "64 KV tensor(s)" in slack.formula
    rounding = sum(allocation_size(n) - n for n in kv_tensor_sizes(r.plan, r.kv.num_gpu_blocks))
    assert 0 < rounding <= slack.bytes


def test_deepseek_v32_latent_and_indexer_by_hand() -> None:
    """DeepSeek-V3.2 on B200 at 0.5.4 (fp8_e4m3 forced, page 64): per layer a 656 B slot and the
    indexer's 128 + 4 B a token, pages of 64 tokens, 61 layers: 122 tensors, each one page
    beyond the pool (kv_buffer (size + 64, 1, 656); index_k_with_scale_buffer ((size + 65) //
    64, 64 × 132))."""
    dep = Deployment(engine="sglang", engine_version="0.5.4", tp=8, dp=8,
                     enable_dp_attention=True)
    e = estimate("deepseek-v3.2", dep, gpu_name="B200")
    plan = e.ranks[0].plan
    assert sorted(set(plan.pool_tensors)) == [(64 * 132, 64 * 132), (64 * 656, 64 * 656)]
    assert len(plan.pool_tensors) == 122
    pages = 975_424 // 64  # published row 12's pool
    sizes = sorted(set(kv_tensor_sizes(plan, pages)))
    assert sizes == [(975_424 + 64) * 132, (975_424 + 64) * 656]


def test_vllm_keeps_one_tensor_per_layer() -> None:
    e = estimate("llama-3.1-8b", Deployment(engine="vllm"), gpu_name="H100")
    plan = e.ranks[0].plan
    assert plan.pool_tensors == ()
    assert kv_tensor_sizes(plan, 10) == [10 * plan.layers[0].page_bytes] * 32


def test_an_unknown_spec_keeps_vllm_layout() -> None:
    specs = (KVLayerSpec(name="full", kind="full", block_size=1, page_bytes=4096),
             KVLayerSpec(name="sliding", kind="sliding", block_size=1, page_bytes=4096,
                         window=4096))
    assert pool_tensors(specs) == ()
    assert pool_tensors(specs[:1]) == ((2048, 2048), (2048, 2048))
