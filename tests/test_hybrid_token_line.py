"""vLLM's "GPU KV cache size" line of a hybrid pool (full-attention groups beside sliding-window
ones) by release: ``num_blocks // len(kv_cache_groups) × min block size`` from the hybrid
KV-cache manager's first release (``HYBRID_TOKEN_LINE_PER_GROUP`` in memprof/core/kvcache.py),
``int(max_concurrency × max_model_len)`` from the release that replaced it.

The calibration case is published row 526 (vLLM 0.10.1.1, gpt-oss-120b TP 4 on A100 80GB):
45.32 GiB of KV and 2,640,144 tokens, i.e. 18,432 B a token — every one of the 36 layers,
because the 16-token blocks are shared out between the two groups."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.kvcache import HYBRID_TOKEN_LINE_PER_GROUP, hybrid_token_line_per_group

GPT_OSS = dict(tp=4, max_model_len=16384, gpu_memory_utilization=0.8)


def _rank(version: str):  # type: ignore[no-untyped-def]
    e = estimate("gpt-oss-120b", Deployment(engine_version=version, **GPT_OSS),  # type: ignore[arg-type]
                 gpu_name="A100-80GB")
    return e, e.ranks[0]


def test_the_rows_hold_where_the_wheels_were_read() -> None:
    assert not hybrid_token_line_per_group("0.9.0")  # one unified group before the manager
    for v in ("0.9.1", "0.10.1.1", "0.19.0", "0.20.0"):
        assert hybrid_token_line_per_group(v), v
    for v in ("0.21.0", "0.25.0", "0.33.0"):
        assert not hybrid_token_line_per_group(v), v
    assert not hybrid_token_line_per_group("0.5.9", "sglang")
    (row,) = HYBRID_TOKEN_LINE_PER_GROUP
    assert row.source and row.introduced_by and row.removed_by


def test_gpt_oss_at_0_10_1_1_prices_a_token_at_every_layer() -> None:
    e, r = _rank("0.10.1.1")
    # hand count: 8 KV heads / TP 4 = 2 heads × head_dim 64 × (K + V) × 2 B = 512 B per layer
    # and token; 18 full + 18 sliding layers → two groups of 18, a block id spends
    # 18 × 16 tokens × 512 B = 147,456 B; "GPU KV cache size" = blocks // 2 groups × 16
    assert r.plan.block_bytes == 18 * 16 * 512
    assert len(r.plan.group_blocks) == 2
    assert r.kv.tokens == r.kv.num_gpu_blocks // 2 * 16
    assert e.kv_cache_tokens == r.kv.tokens
    # what the line prices a token at: every layer's 512 B
    per_token = r.kv.kv_cache_bytes / r.kv.tokens
    assert abs(per_token - 36 * 512) / (36 * 512) < 1e-4
    # the concurrency line is untouched: blocks / blocks a 16,384-token request needs
    assert r.kv.max_concurrency == r.kv.num_gpu_blocks / r.plan.concurrency_blocks(16384, 2048)


def test_after_the_change_the_line_is_concurrency_times_length() -> None:
    _e, r = _rank("0.21.0")
    assert r.kv.tokens == int(r.kv.max_concurrency * 16384)
    assert r.kv.tokens > r.kv.num_gpu_blocks // 2 * 16  # the window caps the sliding group
