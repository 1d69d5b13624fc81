"""The allocator's segments inside SGLang's load figure (``memprof/core/terms/load_segments.py``):
against hand counts of the caching allocator's segment sizes, and against the published SGLang
logs at TP4 whose "mem usage" it closes."""

from __future__ import annotations

from typing import Any

import pytest

from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, load_figure
from memprof.core.terms.allocator import allocation_size
from memprof.core.terms.load_segments import NAME
from tests.test_published_distribution import ROWS, row_estimate

MiB = 1 << 20


def _segments(model: str, dep: Deployment, gpu: str = "H100") -> int:
    e = estimate(model, dep, gpu_name=gpu)
    return sum(c.bytes for c in e.ranks[0].components if c.name == NAME)


def _sglang(tp: int, version: str = "0.5.9") -> Deployment:
    return Deployment(engine="sglang", engine_version=version, tp=tp)


def test_qwen3_32b_at_tp4_by_hand() -> None:
    """Qwen3-32B (hidden 5120, 64 heads and 8 KV heads of 128, intermediate 25600, vocab 151936,
    64 layers, untied, bf16) at TP4: each large shard in a segment rounded up to 2 MiB, the
    norms in one 2 MiB small-pool segment; the RoPE temporaries (40,960 × 64 × 4 B = 10 MiB
    each, segments of their own) are freed whole and released by empty_cache."""
    qkv = (64 + 2 * 8) // 4 * 128 * 5120 * 2  # 25 MiB
    o_proj = 5120 * (64 // 4 * 128) * 2  # 20 MiB
    gate_up = 2 * (25600 // 4) * 5120 * 2  # 125 MiB
    down = 5120 * (25600 // 4) * 2  # 62.5 MiB
    layer = sum(allocation_size(n) - n for n in (qkv, o_proj, gate_up, down))
    assert (qkv, o_proj, gate_up, down) == (25 * MiB, 20 * MiB, 125 * MiB, 62.5 * MiB)
    assert layer == 3.5 * MiB
    embed = 151936 // 4 * 5120 * 2  # 370.94 MiB, and lm_head the same
    norms = 64 * (2 * 128 * 2 + 2 * 5120 * 2) + 5120 * 2  # q/k norms, 2 layer norms; final
    want = 64 * layer + 2 * (allocation_size(embed) - embed) + 2 * MiB - norms
    assert want == 237_852_672
    assert _segments("qwen3-32b", _sglang(4)) == want


def test_tp1_shards_are_whole_segments() -> None:
    """At TP1 the same matrices are whole multiples of 2 MiB (qkv 100 MiB, o_proj 80, gate_up
    500, down 250; embed 1483.75 MiB in 1484): the TP4 figure is the sharding's."""
    tp1 = _segments("qwen3-32b", _sglang(1))
    embed = 151936 * 5120 * 2
    norms = 64 * (2 * 128 * 2 + 2 * 5120 * 2) + 5120 * 2
    assert tp1 == 2 * (allocation_size(embed) - embed) + 2 * MiB - norms
    assert tp1 < _segments("qwen3-32b", _sglang(4)) / 50


def test_the_load_figure_holds_it_and_vllm_has_none() -> None:
    e = estimate("qwen3-32b", _sglang(4), gpu_name="H100")
    r = e.ranks[0]
    seg = next(c for c in r.components if c.name == NAME)
    assert seg.category == "weights" and seg.where == "budget"
    # no first kernel at TP4 (PyNccl's warm-up ran it before the load)
    assert load_figure(e, r) == sum(c.bytes for c in r.components
                                    if c.where == "budget" and c.category in ("weights",
                                                                              "scratch"))
    v = estimate("qwen3-32b", Deployment(tp=4), gpu_name="H100")
    assert not any(c.name == NAME for c in v.ranks[0].components)


def test_the_runtime_slack_does_not_count_it_twice() -> None:
    """The runtime slack replay (``allocator_runtime_terms``) holds the load's segments too: it
    takes the term off (reserved − requested − segments, floored at 0)."""
    from memprof.alloc.monotone import MonotoneReplay
    from memprof.core.estimate import rank_context
    from memprof.core.terms.allocations import rank_allocation_sizes

    e = estimate("qwen3-32b", _sglang(4), gpu_name="H100")
    r = e.ranks[0]
    comps = {c.name: c.bytes for c in r.components}
    sim = MonotoneReplay().extend(rank_allocation_sizes(rank_context(e, r)))
    assert sim.reserved - sim.requested > comps[NAME] > 200 * MiB
    assert comps["allocator slack (simulated)"] == sim.reserved - sim.requested - comps[NAME]


def _row(i: int) -> dict[str, Any]:
    return next(r for r in ROWS if r["id"] == i)


@pytest.mark.parametrize("row_id", [401, 1201, 1202, 1457])
def test_published_tp4_loads(row_id: int) -> None:
    """SGLang's "mem usage" at TP4 (Qwen3-32B on B200 and on RTX 5090, Qwen2.5-32B on L4,
    Qwen3-14B on RTX 4090; sglang 0.4.3 and main), 1.4-2.6% above memprof before this term:
    within 0.2% with it. Its share is 185-227 MiB of each."""
    row = _row(row_id)
    e, _ = row_estimate(row)
    r = max(e.ranks, key=lambda x: load_figure(e, x))
    logged = row["observed"]["weights_gb"] * GiB
    seg = sum(c.bytes for c in r.components if c.name == NAME)
    assert 180 * MiB < seg < 230 * MiB
    assert abs(load_figure(e, r) - logged) / logged < 0.002
    assert abs(load_figure(e, r) - seg - logged) / logged > 0.01


@pytest.mark.parametrize(("model", "tp", "gpu"), [
    ("qwen3-32b", 1, "H100"), ("qwen3-32b", 4, "H100"), ("qwen3-32b", 8, "H100"),
    ("llama-3.1-8b", 2, "H100"), ("qwen3-0.6b", 1, "MI355X"), ("qwen3-0.6b", 2, "MI355X"),
    ("qwen3-30b-a3b", 4, "H200"), ("deepseek-r1", 8, "H200"), ("qwen2.5-7b-instruct", 1, "L4")])
def test_the_fast_replay_is_the_simulator(model: str, tp: int, gpu: str) -> None:
    """The simulator to the last free and the allocation-only rest on free-block sizes give
    what the simulator gives op by op, then ``empty_cache``."""
    from memprof.core.estimate import rank_context
    from memprof.core.terms.load_segments import (
        full_replay,
        load_segment_ops,
        segments_beyond_tensors,
    )

    e = estimate(model, _sglang(tp), gpu_name=gpu)
    ops = load_segment_ops(rank_context(e, e.ranks[0]))
    assert any(kind == 1 for kind, _ in ops)  # the RoPE temporaries are freed
    assert segments_beyond_tensors.__wrapped__(ops) == full_replay(ops)
