"""vLLM's hybrid KV-cache manager: state groups (one block per request), page-size unification
of attention and Mamba / linear-attention pages, chunked-local admission, and
``--disable-hybrid-kv-cache-manager`` (``memprof.core.kvcache``, ``memprof.core.hybrid_state``).

The published check is a vLLM v0.10.2 start-up of Qwen3-Next-80B-A3B-Instruct, TP=2 on H200,
bf16 KV, max_model_len 262,144, max_num_batched_tokens 8,192 (a user's start-up log kept in
a public GitHub repository; the code index that found it does not name the repository, so
the lines are quoted here in full):

    [config.py:390] Setting attention block size to 544 tokens to ensure that attention page
        size is >= mamba page size.
    [config.py:411] Padding mamba page size by 1.49% to ensure that mamba page size and
        attention page size are exactly equal.
    [gpu_worker.py:298] Available KV cache memory: 44.59 GiB
    [kv_cache_utils.py:1028] GPU KV cache size: 973,760 tokens
    [kv_cache_utils.py:1032] Maximum concurrency for 262,144 tokens per request: 14.77x
    ... num_gpu_blocks is: 7162 ... Current kv cache memory in use is 47878721024 bytes.

Tolerance: none — block size, blocks, tokens and concurrency are integer/rounded log figures
and must match exactly from the logged available memory.
"""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.core.attention.base import KVLayerSpec
from memprof.core.hybrid_state import (
    align_attention_block,
    gated_delta_net_state_shapes,
    mamba2_state_shapes,
    state_page_bytes,
)
from memprof.core.kvcache import (
    _grouped_plan,
    capacity,
    logged_tokens_per_group,
    unify_hybrid_specs,
)
from tests.cli_helpers import completed

# Qwen3-Next-80B-A3B config.json: 48 layers, full attention every 4th (full_attention_interval
# 4), 2 KV heads × head_dim 256; linear attention 16 key heads × 128, 32 value heads × 128,
# conv kernel 4.
BF16 = 2


def _qwen3_next_tp2() -> tuple[list[KVLayerSpec], int]:
    conv, rec = gated_delta_net_state_shapes(tp=2, num_k_heads=16, num_v_heads=32,
                                             head_k_dim=128, head_v_dim=128, conv_kernel=4)
    state = state_page_bytes((conv, rec), (BF16, BF16))
    per_token = 2 * 1 * 256 * BF16  # K and V, 2 KV heads / TP 2, head 256
    al = align_attention_block(attn_bytes_per_token=per_token, state_bytes=state, block_size=16)
    specs = [KVLayerSpec(name="full", kind="full", block_size=al.block_size,
                         page_bytes=al.page_bytes) if (i + 1) % 4 == 0 else
             KVLayerSpec(name="state", kind="state", block_size=al.block_size,
                         page_bytes=al.page_bytes) for i in range(48)]
    return specs, al.block_size


def test_gated_delta_net_shapes_by_hand() -> None:
    conv, rec = gated_delta_net_state_shapes(tp=2, num_k_heads=16, num_v_heads=32,
                                             head_k_dim=128, head_v_dim=128, conv_kernel=4)
    assert conv == (3, (2 * 16 * 128 + 32 * 128) // 2)
    assert rec == (16, 128, 128)
    assert state_page_bytes((conv, rec), (2, 2)) == 3 * 4096 * 2 + 16 * 128 * 128 * 2


def test_page_unification_matches_the_log() -> None:
    al = align_attention_block(attn_bytes_per_token=1024, state_bytes=548_864, block_size=16)
    assert al.block_size == 544
    assert al.page_bytes == 544 * 1024
    assert f"{al.padding_pct:.2f}" == "1.49"
    # a user block larger than the derived one is kept, the state padded up to it
    assert align_attention_block(attn_bytes_per_token=1024, state_bytes=548_864,
                                 block_size=1024).block_size == 1024


def test_qwen3_next_groups_blocks_tokens_concurrency() -> None:
    specs, block = _qwen3_next_tp2()
    plan = _grouped_plan(specs, block, "auto")
    assert plan.layout == "hybrid"
    # 12 full + 36 state layers: group size 12, one full group and three state groups
    assert sorted((n, g) for n, _b, _w, g in plan.group_blocks) == [("full", 1), ("state", 3)]
    assert plan.block_bytes == 12 * 544 * 1024
    cap = capacity(plan, 47_878_721_024, 262_144, 8192)
    assert cap.num_gpu_blocks == 7162
    # one request: cdiv(262144, 544) = 482 full blocks + one block in each state group
    assert cap.blocks_per_request == 482 + 3
    assert f"{cap.max_concurrency:.2f}" == "14.77"
    assert logged_tokens_per_group(plan, cap.num_gpu_blocks) == 973_760


def test_chunked_local_admission_is_capped_by_the_chunk() -> None:
    page = 16 * 1024
    specs = ([KVLayerSpec(name="full", kind="full", block_size=16, page_bytes=page)] * 12
             + [KVLayerSpec(name="chunked", kind="chunked", block_size=16, page_bytes=page,
                            window=8192)] * 36)
    plan = _grouped_plan(specs, 16, "auto")
    # full: cdiv(131072, 16) = 8192; chunked: cdiv(min(8192 + 8192, 131072), 16) = 1024, × 3
    assert plan.blocks_per_request(131_072, 8192) == 8192 + 3 * 1024
    # a short request is not charged beyond its length
    assert plan.blocks_per_request(100, 8192) == 7 + 3 * 7


def test_disable_hybrid_turns_windows_into_full_attention() -> None:
    page = 16 * 1024
    specs = ([KVLayerSpec(name="full", kind="full", block_size=16, page_bytes=page)] * 8
             + [KVLayerSpec(name="sliding", kind="sliding", block_size=16, page_bytes=page,
                            window=4096)] * 40)
    unified = unify_hybrid_specs(specs)
    assert {(s.kind, s.window) for s in unified} == {("full", 0)}
    plan = _grouped_plan(unified, 16, "auto")
    assert plan.layout == "uniform"
    assert plan.blocks_per_request(131_072, 8192) == 8192
    # with the manager on, the 40 sliding layers cost far fewer blocks per request
    assert _grouped_plan(specs, 16, "auto").blocks_per_request(131_072, 8192) < 8192 * 6


def test_disable_hybrid_refuses_state_layers() -> None:
    specs, _block = _qwen3_next_tp2()
    with pytest.raises(BadInput, match="cannot unify"):
        unify_hybrid_specs(specs)
    uniform = [KVLayerSpec(name="full", kind="full", block_size=16, page_bytes=1)] * 4
    assert unify_hybrid_specs(uniform) == uniform


def test_mamba2_shapes_by_hand() -> None:
    # Mamba-2 mixer of 128 heads × 64, state 128, 8 groups, conv 4 (intermediate 8192)
    conv, ssm = mamba2_state_shapes(tp=1, intermediate_size=8192, n_groups=8, num_heads=128,
                                    head_dim=64, state_size=128, conv_kernel=4)
    assert conv == (3, 8192 + 2 * 8 * 128)
    assert ssm == (128, 64, 128)
    conv, ssm = mamba2_state_shapes(tp=4, intermediate_size=8192, n_groups=8, num_heads=128,
                                    head_dim=64, state_size=128, conv_kernel=4)
    assert conv == (3, (8192 + 2 * 8 * 128) // 4) and ssm == (32, 64, 128)
    # one group over 4 ranks: replicated to 4 so each head shard has its own
    conv, _ssm = mamba2_state_shapes(tp=4, intermediate_size=8192, n_groups=1, num_heads=128,
                                     head_dim=64, state_size=128, conv_kernel=4)
    assert conv == (3, (8192 + 2 * 4 * 128) // 4)
    with pytest.raises(BadInput):
        mamba2_state_shapes(tp=3, intermediate_size=8192, n_groups=8, num_heads=128,
                            head_dim=64, state_size=128, conv_kernel=4)


def test_disable_hybrid_setting_on_a_sliding_window_model() -> None:
    """gpt-oss-120b (18 sliding + 18 full layers, 8 KV heads × 64): with the manager off every
    layer is charged as full attention, 36 × K,V × 8 × 64 × 2 B = 73,728 B/token, one group."""
    from memprof.core.deployment import Deployment, ranks
    from memprof.core.kvcache import kv_plan
    from memprof.core.models import load_model

    spec = load_model("gpt-oss-120b")
    on = Deployment(tp=1, max_model_len=131_072)
    off = Deployment(tp=1, max_model_len=131_072, disable_hybrid_kv_cache_manager=True)
    plan_on = kv_plan(spec, on, ranks(on)[0], spec.dtype)
    plan_off = kv_plan(spec, off, ranks(off)[0], spec.dtype)
    assert plan_on.layout == "hybrid" and plan_off.layout == "uniform"
    assert plan_off.bytes_per_token == 36 * 2 * 8 * 64 * 2
    assert plan_off.blocks_per_request(131_072, 8192) == 131_072 // 16
    # the sliding half no longer caps its blocks: one request needs more bytes with it off
    assert plan_off.request_bytes(131_072, 8192) == 131_072 * 36 * 2 * 8 * 64 * 2
    assert plan_on.request_bytes(131_072, 8192) < plan_off.request_bytes(131_072, 8192)


def test_disable_hybrid_is_a_vllm_flag() -> None:
    p = completed(["estimate", "--model", "gpt-oss-120b", "--gpu", "H100", "--engine",
                   "sglang", "--disable-hybrid-kv-cache-manager"])
    err = p.stderr.splitlines()
    assert p.returncode == 2 and len(err) == 2
    assert err[0].startswith("error: --disable-hybrid-kv-cache-manager is vLLM's flag")
    assert err[1].startswith("hint: ")
