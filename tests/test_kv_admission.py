"""KV admission by vLLM release: "KV cache needed for one max_model_len request", "Maximum
concurrency" and the estimated maximum model length, as vLLM computes them, against hand
calculations. Sources (read in the wheels): v1/core/kv_cache_utils.py (0.23.0-0.28.0),
v1/core/kv_cache_planning.py (0.33.0), v1/kv_cache_interface.py, config/vllm.py."""

import pytest

from memprof.base.units import GiB, cdiv
from memprof.core.attention.dsv4 import DSV4_TUPLE_POOL, approximate_gcd
from memprof.core.deployment import Deployment, ranks
from memprof.core.kvcache import (
    CONCURRENCY_GROUP0_PAGE,
    SWA_IN_FLIGHT_BATCHES,
    KVPlan,
    capacity,
    kv_plan,
    max_fitting_model_len,
)
from memprof.core.models import load_model
from memprof.core.versions import rule_in_force
from tests.test_terms import ROWS

FLASH_FULL_PAGES = (37_440, 8_640, 1_728)  # C4A 64·584 → 576·65, C4 indexer 64·132 → 576·15,
# C128A 2·584 → 576·3 (fp8_ds_mla pages padded to 576 B)


def _plan(model: str, version: str, **kw: int) -> KVPlan:
    dep = Deployment(engine_version=version, **kw)
    return kv_plan(load_model(model), dep, ranks(dep)[0], "bfloat16")


def test_rule_ranges() -> None:
    assert rule_in_force(SWA_IN_FLIGHT_BATCHES, "0.25.0") is None
    assert rule_in_force(SWA_IN_FLIGHT_BATCHES, "0.26.0") is not None
    assert rule_in_force(SWA_IN_FLIGHT_BATCHES, "0.28.0").value == 0  # type: ignore[union-attr]
    assert rule_in_force(SWA_IN_FLIGHT_BATCHES, "0.29.0").value == 1  # type: ignore[union-attr]
    assert rule_in_force(SWA_IN_FLIGHT_BATCHES, None) is not None  # holds today (0.33.0)
    assert rule_in_force(DSV4_TUPLE_POOL, "0.28.0") is not None
    assert rule_in_force(DSV4_TUPLE_POOL, "0.29.0") is None
    assert rule_in_force(CONCURRENCY_GROUP0_PAGE, "0.26.0") is not None
    assert rule_in_force(CONCURRENCY_GROUP0_PAGE, "0.27.0") is None


def test_approximate_gcd_as_vllm() -> None:
    # _approximate_gcd([21, 43, 21, 20], lower_bound=21): padding d=21: 0+20+0+1 = 21;
    # d=22: 1+1+1+2 = 5; d=23: 2+3+2+3 = 10; … d=43: 22+0+22+23 = 67 → 22
    assert approximate_gcd([21, 43, 21, 20], lower_bound=21) == 22
    # ties prefer the larger d: [4, 6] from 2: d=2 pad 0, d=3 pad 2, d=4 pad 2, d=6 pad 2 → 2
    assert approximate_gcd([4, 6], lower_bound=2) == 2
    assert approximate_gcd([6, 6], lower_bound=2) == 6


def test_sliding_window_in_flight_batches() -> None:
    # SlidingWindowSpec.max_admission_blocks_per_request: cdiv(min(W − 1 + in-flight, L), B) + 1.
    # 0.25.0: in-flight = max_num_batched_tokens; 0.26.0 on: max_in_flight_tokens =
    # max_concurrent_batches × mnbt, 2 with async scheduling at PP=1 (config/vllm.py).
    # gpt-oss-120b: 18 full + 18 sliding (W 128) layers, block 16, L 131072, mnbt 8192.
    old = _plan("gpt-oss-120b", "0.25.0")
    new = _plan("gpt-oss-120b", "0.26.0")
    assert (old.in_flight_batches, new.in_flight_batches) == (1, 2)
    assert old.blocks_per_request(131072, 8192) == 8192 + cdiv(127 + 8192, 16) + 1 == 8713
    assert new.blocks_per_request(131072, 8192) == 8192 + cdiv(127 + 2 * 8192, 16) + 1 == 9225
    # PP > 1: async scheduling off with the V1 runner → max_concurrent_batches = pp (0.26.0–
    # 0.28.x); the V2 runner, the default from 0.29.0, keeps it on → pp + 1
    assert _plan("gpt-oss-120b", "0.28.0", pp=4).in_flight_batches == 4
    assert _plan("gpt-oss-120b", "0.33.0", pp=4).in_flight_batches == 5
    assert _plan("gpt-oss-120b", "0.33.0", pp=1).in_flight_batches == 2
    # a short max_model_len caps it: min(127 + 16384, 4096) = 4096 → 256 + 1 blocks
    assert new.blocks_per_request(4096, 8192) == 256 + 256 + 1


def _flash_row20(version: str) -> KVPlan:
    return _plan("deepseek-v4-flash", version, tp=2, max_model_len=121344, max_num_seqs=32,
                 max_num_batched_tokens=8192)


def test_dsv4_tuple_pool_before_0_29() -> None:
    # 0.26.0 _get_kv_cache_groups_uniform_groups on DeepSeek-V4-Flash: full_mla = 21 C4A +
    # 21 C4I + 20 C128A (21 tuples); SWA 43 layers (43); C4 state 21 × (32832 → padded 37440) +
    # 21 × 8640 (21); C128 state 20 × (32832 → 37440) (20). T = _approximate_gcd(...) = 22: SWA
    # splits into cdiv(43, 22) = 2 groups of 22 and 21 layers, the states stay whole.
    # _bucket_layers_by_page_size: 37440 × 22 (the larger SWA group) + 8640 × 21 + 1728 × 20.
    plan = _flash_row20("0.26.0")
    assert plan.block_bytes == 22 * 37_440 + 21 * 8_640 + 20 * 1_728 == 1_039_680
    # _max_memory_usage_bytes_from_groups (DeepseekV4 branch): num_layer_tuples (22, the SWA
    # group) × Σ distinct full-MLA pages per block of the request
    assert plan.request_block_bytes == 22 * sum(FLASH_FULL_PAGES) == 1_051_776
    assert [n for *_x, n in plan.group_blocks] == [1, 2, 1, 1]
    # 0.29.0 _get_packed_kv_cache_groups + _get_kv_cache_bytes_per_block: the largest group's
    # Σ pages (full_mla), a multiple of 576
    new = _flash_row20("0.29.0")
    assert new.block_bytes == 21 * 37_440 + 21 * 8_640 + 20 * 1_728 == 1_002_240
    assert new.request_block_bytes == 0  # the pool stride
    assert new.block_bytes % 576 == 0


def test_dsv4_request_and_concurrency_by_version() -> None:
    # One 121344-token request, mnbt 8192, two batches in flight (0.26.0 on):
    full = cdiv(121344, 256)  # 474
    swa = cdiv(127 + 16384, 64) + 1  # 259, in each of 2 SWA groups
    c4s = cdiv(7 + 16384, 4) + 1  # 4099 (window 8, block 4)
    c128s = cdiv(127 + 16384, 8) + 1  # 2065 (window 128, block 8)
    pages = full + 2 * swa + c4s + c128s
    assert pages == 7156
    p26, p27, p33 = (_flash_row20(v) for v in ("0.26.0", "0.27.0", "0.33.0"))
    assert p26.blocks_per_request(121344, 8192) == pages
    assert p26.request_bytes(121344, 8192) == pages * 1_051_776
    assert p33.request_bytes(121344, 8192) == pages * 1_002_240
    # get_max_concurrency_for_kv_cache_config, 0.26.0: cdiv(Σ_g pages_g × page_g, page_0), the
    # UniformType page of each group being Σ of its layers' (padded) pages
    g_full = 21 * 37_440 + 21 * 8_640 + 20 * 1_728
    g_swa = (22 + 21) * 37_440
    g_c4s = 21 * 37_440 + 21 * 8_640
    g_c128s = 20 * 37_440
    old = cdiv(full * g_full + swa * g_swa + c4s * g_c4s + c128s * g_c128s, g_full)
    assert p26.concurrency_blocks(121344, 8192) == old == 6391
    # 0.27.0 on: Σ_g cdiv(bytes_g, page_g) = Σ pages
    assert p27.concurrency_blocks(121344, 8192) == pages


def test_row20_dsv4_flash_h20_tokens_at_0_26() -> None:
    # Row 20 (vLLM 0.26.0, issue #51041): "KV cache holds only 150K tokens in 7.7 GiB" at
    # max_model_len 121344, TP2, max_num_seqs 32, mnbt 8192. Given the row's 7.7 GiB, the 0.26.0
    # rules give 7.7 GiB // 1,039,680 B = 7952 blocks, / 6391 blocks per request = 1.244x →
    # int(1.244 × 121344) = 150,982 tokens. Tolerance 5% (the row's figures are rounded).
    plan = _flash_row20("0.26.0")
    cap = capacity(plan, int(7.7 * GiB), 121344, 8192)
    assert cap.num_gpu_blocks == int(7.7 * GiB) // 1_039_680 == 7952
    assert cap.tokens == int(7952 / 6391 * 121344)
    assert ROWS[20]["observed"]["kv_tokens_approx"] == 150_000
    assert cap.tokens == pytest.approx(150_000, rel=0.05)


def test_estimated_max_model_len_uses_the_request_rule() -> None:
    # _estimate_max_model_len_from_groups: the largest L with
    # _max_memory_usage_bytes_from_groups(L) <= available
    plan = _flash_row20("0.26.0")
    need = plan.request_bytes(121344, 8192)
    assert max_fitting_model_len(plan, need, 8192, 121344) == 121344
    below = max_fitting_model_len(plan, need - 1, 8192, 121344)
    assert below < 121344
    assert plan.request_bytes(below, 8192) <= need - 1 < plan.request_bytes(below + 1, 8192)


def test_request_sums_layers_before_0_14() -> None:
    # gpt-oss-120b PP=4, stage 0 = layers 0-8: 5 sliding (W 128) + 4 full; group_size 5 (5 < 1.5·4,
    # _get_kv_cache_groups_uniform_page_size), so the full group is padded to 5 layers. Page =
    # 16 tokens × 8 KV heads × (64 + 64) × 2 B = 32768 B. L 131072, mnbt 8192, 0.13/0.14: one
    # batch in flight: full cdiv(131072, 16) = 8192 blocks, sliding cdiv(127 + 8192, 16) + 1 = 521.
    page = 16 * 8 * (64 + 64) * 2
    old = _plan("gpt-oss-120b", "0.13.0", pp=4)
    new = _plan("gpt-oss-120b", "0.14.0", pp=4)
    assert old.block_bytes == new.block_bytes == 5 * page
    # 0.13.0 check_enough_kv_cache_memory: Σ per layer max_memory_usage_bytes
    assert old.request_bytes(131072, 8192) == 4 * page * 8192 + 5 * page * 521 == 1_159_102_464
    # 0.14.0 _max_memory_usage_bytes_from_groups: group_size × page × Σ group blocks
    assert new.request_bytes(131072, 8192) == 5 * page * (8192 + 521) == 1_427_537_920
    # the estimated maximum model length follows the same rule
    avail = 1_300_000_000
    assert max_fitting_model_len(old, avail, 8192, 131072) == 131072
    assert max_fitting_model_len(new, avail, 8192, 131072) < 131072
