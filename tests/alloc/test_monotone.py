"""memprof.alloc.monotone against the simulator it shortcuts: the same totals and largest free
block after every allocation, for random sequences and for every bundled model's weights."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.alloc import CachingAllocator
from memprof.alloc.monotone import MonotoneReplay, pool_reserved_by_stages
from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment, ranks
from memprof.core.models import bundled_models, load_model
from memprof.core.weights.rank import weights_in_order_params

MiB = 1 << 20


def totals(a: CachingAllocator) -> tuple[int, int, int, int, int]:
    s = a.memory_stats()
    return (s["reserved_bytes.all.current"], s["requested_bytes.all.current"],
            s["segment.all.current"], a.largest_free_block(), s["allocated_bytes.all.current"])


def mine(m: MonotoneReplay) -> tuple[int, int, int, int, int]:
    return m.reserved, m.requested, m.segments, m.largest_free_block(), m.allocated


def test_hand_calculation() -> None:
    # 3 MiB → a 20 MiB segment (kLargeBuffer), 17 MiB stays free; 12 MiB fits in it (best fit)
    # leaving 5 MiB; 100 B → 512 B of a 2 MiB small segment; 6 MiB + 1 B → 6 MiB + 512 B, more
    # than the 5 MiB block, so a second 20 MiB segment with 14 MiB − 512 B left free.
    m = MonotoneReplay().extend([3 * MiB, 12 * MiB, 100, 6 * MiB + 1])
    # allocated: 3 MiB and 12 MiB split off (blocks of their size), 512 B, 6 MiB + 512 B
    assert mine(m) == (42 * MiB, 21 * MiB + 101, 3, 14 * MiB - 512, 21 * MiB + 1024)
    assert m.large == [5 * MiB, 14 * MiB - 512] and m.small == [2 * MiB - 512]


sizes = st.one_of(st.integers(0, 4096), st.integers(4096, 2 * MiB),
                  st.integers(MiB, 12 * MiB), st.integers(10 * MiB, 400 * MiB))


def test_hand_calculation_with_a_max_split_size() -> None:
    # max_split_size_mb:20 (vLLM's model load from 0.21.0). 52.5 MiB → a 54 MiB segment: the
    # request is oversize, so the 1.5 MiB rest is not split off and the block is allocated
    # whole; 3 MiB → a 20 MiB segment (kLargeBuffer), split (3 MiB < 20 MiB), 17 MiB free; 30 MiB
    # + 1 B → the 17 MiB block is too small: a 32 MiB segment, whole again (2 MiB − 512 B rest)
    m = MonotoneReplay(max_split_size=20 * MiB).extend([52 * MiB + MiB // 2, 3 * MiB,
                                                        30 * MiB + 1])
    assert mine(m) == (106 * MiB, 85 * MiB + MiB // 2 + 1, 3, 17 * MiB, 89 * MiB)
    assert m.large == [17 * MiB]
    # without it, both rests are split off and stay free
    d = MonotoneReplay().extend([52 * MiB + MiB // 2, 3 * MiB, 30 * MiB + 1])
    assert d.allocated == 52 * MiB + MiB // 2 + 3 * MiB + 30 * MiB + 512
    assert d.large == [MiB + MiB // 2, 2 * MiB - 512, 17 * MiB]


def test_an_oversize_free_block_serves_no_smaller_request() -> None:
    # a freed 40 MiB segment (oversize at max_split_size_mb:20) takes a 39 MiB request whole, but
    # not a 14 MiB one (smaller than max_split_size) nor a 20 MiB one (40 MiB ≥ 20 + the 20 MiB
    # max_non_split_rounding_size): each of those gets a segment of its own
    for want, whole in ((39 * MiB, True), (14 * MiB, False), (20 * MiB, False)):
        m = MonotoneReplay(large=[40 * MiB], max_split_size=20 * MiB)
        m.malloc(want)
        assert (m.large == []) == whole, want
        assert m.allocated == (40 * MiB if whole else want)


@settings(max_examples=300, deadline=None)
@given(st.lists(sizes, min_size=1, max_size=60), st.sampled_from(["", "max_split_size_mb:20",
                                                                  "max_split_size_mb:64"]))
def test_random_sequences_match_the_simulator(seq: list[int], conf: str) -> None:
    a = CachingAllocator(conf)
    m = MonotoneReplay(max_split_size=a.conf.max_split_size)
    for n in seq:
        a.malloc(n)
        m.malloc(n)
        assert mine(m) == totals(a)
    c = m.copy()  # a copy continues independently
    c.malloc(seq[0])
    assert mine(m) == totals(a)
    # ``extend``'s inlined steps are ``malloc``'s, under a max_split_size too
    e = MonotoneReplay(max_split_size=a.conf.max_split_size).extend(seq)
    assert (mine(e), e.small, e.large, e.created) == (mine(m), m.small, m.large, m.created)


@pytest.mark.parametrize("model", sorted(bundled_models()))
def test_every_bundled_model_weights_match_the_simulator(model: str) -> None:
    spec = load_model(model)
    for tp in (1, 8):
        dep = Deployment(tp=tp)
        coord = ranks(dep)[0]
        try:
            params = weights_in_order_params(spec, dep, spec.quant, coord, "sm90")
        except BadInput:  # a TP the model's heads do not divide
            continue
        for conf in ("", "max_split_size_mb:20"):
            a = CachingAllocator(conf)
            m = MonotoneReplay(max_split_size=a.conf.max_split_size)
            for _, n in params:
                a.malloc(n)
                m.malloc(n)
            assert mine(m) == totals(a), (model, tp, conf)


def simulated_pool(stages: list[list[int]]) -> int:
    a = CachingAllocator()
    a.begin_capture(1)
    for sizes in stages:
        handles = [a.malloc(n) for n in sizes]
        for h in handles:
            a.free(h)
    a.end_capture()
    return int(a.memory_stats()["reserved_bytes.all.current"])


def test_pool_by_stages_hand_calculation() -> None:
    # stage 1: 30 MiB → a 30 MiB segment, 4 MiB → a 20 MiB one; freed, both whole again.
    # stage 2: 16 MiB fits the 20 MiB segment (best fit), 25 MiB the 30 MiB one, 40 MiB needs
    # a new 40 MiB segment: 90 MiB in all.
    assert pool_reserved_by_stages(((30 * MiB, 4 * MiB), (16 * MiB, 25 * MiB, 40 * MiB))) \
        == 90 * MiB == simulated_pool([[30 * MiB, 4 * MiB], [16 * MiB, 25 * MiB, 40 * MiB]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(sizes, min_size=1, max_size=25), min_size=1, max_size=6))
def test_pool_by_stages_matches_the_simulator(stages: list[list[int]]) -> None:
    assert pool_reserved_by_stages(tuple(tuple(s) for s in stages)) == simulated_pool(stages)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), sizes), min_size=1, max_size=40),
       st.lists(sizes, max_size=40), st.sampled_from(["", "max_split_size_mb:20"]))
def test_continue_from_a_simulator_with_frees(head: list[tuple[bool, int]],
                                              tail: list[int], conf: str) -> None:
    # a head of allocations and frees (each True frees the oldest live block) in the simulator,
    # then a tail that frees nothing in the monotone model: the same allocated, requested and
    # reserved bytes as the simulator running both (freed oversize blocks among the free ones
    # with a max_split_size)
    from memprof.alloc.monotone import continue_from

    a, live = CachingAllocator(conf), []
    for free, n in head:
        if free and live:
            a.free(live.pop(0))
        else:
            live.append(a.malloc(n))
    s = a.memory_stats()
    rest = continue_from(a).extend(tail)
    for n in tail:
        a.malloc(n)
    t = a.memory_stats()
    assert (s["allocated_bytes.all.current"] + rest.allocated,
            s["requested_bytes.all.current"] + rest.requested,
            s["reserved_bytes.all.current"] + rest.reserved) == \
        (t["allocated_bytes.all.current"], t["requested_bytes.all.current"],
         t["reserved_bytes.all.current"])
