"""The engine modules (memprof/core/engines/): each engine's layout, budget line and refusals,
asked through ``engine_of`` as the estimator asks them."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput, LayoutError
from memprof.base.units import GiB
from memprof.core.components import Component
from memprof.core.deployment import Deployment, ranks
from memprof.core.engines import ENGINES, engine_of
from memprof.core.engines.sglang import SGLang
from memprof.core.engines.vllm import VLLM
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu


def test_registry_names_each_engine_once() -> None:
    assert isinstance(ENGINES["vllm"], VLLM) and isinstance(ENGINES["sglang"], SGLang)
    assert engine_of(Deployment(engine="sglang")) is ENGINES["sglang"]


def test_an_unknown_engine_is_bad_input_wherever_it_is_asked_first() -> None:
    with pytest.raises(BadInput, match="unknown --engine 'tgi'"):
        engine_of(Deployment(engine="tgi"))
    with pytest.raises(BadInput, match="unknown --engine"):
        _ = Deployment(engine="tgi", tp=2).world_size  # a layout asked before validate
    with pytest.raises(BadInput, match="unknown --engine"):
        estimate("qwen3-0.6b", Deployment(engine="tgi", gpu_memory_utilization=0.9),
                 gpu_name="H200")


def test_layouts() -> None:
    v = Deployment(tp=4, pp=2, dp=3, enable_expert_parallel=True)
    assert (v.world_size, v.copies, v.ep_size, v.moe_tp_size) == (24, 3, 12, 1)
    assert [r.rank for r in ranks(v)] == list(range(24))
    assert ranks(v)[8].dp_rank == 1 and ranks(v)[8].ep_rank == 4  # DP outermost, then PP
    s = Deployment(engine="sglang", tp=8, dp=4, enable_dp_attention=True)
    assert (s.world_size, s.attn_tp, s.copies, s.moe_tp_size) == (8, 2, 1, 8)
    assert [r.dp_rank for r in ranks(s)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_budget_lines() -> None:
    gpu = find_gpu("H200")
    v = ENGINES["vllm"].budget(Deployment(), gpu, requested=100, budgeted=30, baseline=5,
                               loaded=20, mfs=0.0)
    assert (v.available, v.envelope) == (70, 100)
    kv = ENGINES["vllm"].budget(Deployment(kv_cache_memory_bytes=50), gpu, requested=100,
                                budgeted=30, baseline=5, loaded=20, mfs=0.0)
    assert (kv.available, kv.envelope) == (50, 80)
    s = ENGINES["sglang"].budget(Deployment(engine="sglang"), gpu, requested=0, budgeted=0,
                                 baseline=gpu.total_bytes - 100 * GiB, loaded=10 * GiB, mfs=0.5)
    assert (s.available, s.envelope) == (40 * GiB, 50 * GiB)


def test_sglang_pages_align_a_uniform_pool() -> None:
    # block_bytes is one page of 64 one-byte tokens: 1000 B hold 15 whole pages (960 tokens,
    # SGLang's ``rest // cell_size // page_size * page_size``), not 960 pages
    assert ENGINES["sglang"].blocks(1000, 64, 64, "uniform") == 15
    assert ENGINES["sglang"].blocks(1000, 1, 64, "hybrid") == 1000
    assert ENGINES["vllm"].blocks(1000, 1, 64, "uniform") == 1000


def test_sglang_counts_everything_not_loaded_against_its_slack() -> None:
    comps = [Component(name="w", category="weights", bytes=10, where="budget"),
             Component(name="a", category="activation", bytes=3, where="budget"),
             Component(name="kv", category="kv_cache", bytes=5, where="budget"),
             Component(name="g", category="cudagraph", bytes=2, where="runtime")]
    used, outside = ENGINES["sglang"].used(comps, 1, 20)
    assert used == 1 + 20 + 5 and [c.name for c in outside] == ["a", "g"]
    used, outside = ENGINES["vllm"].used(comps, 1, 20)
    assert used == 1 + 20 + 2 and [c.name for c in outside] == ["g"]


def test_sglang_dp_attention_layout_is_refused_where_dp_does_not_divide_tp() -> None:
    with pytest.raises(LayoutError, match="divide --tp"):
        ENGINES["sglang"].check_layout(Deployment(engine="sglang", tp=6, dp=4,
                                                  enable_dp_attention=True))
    ENGINES["vllm"].check_layout(Deployment(tp=6, dp=4))  # vLLM's DP is whole engines
