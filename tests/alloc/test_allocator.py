"""The allocator simulator, rule by rule, with cases written here (figures measured on an H200
with torch 2.11 for single requests), property tests of its invariants, config parsing and the
replay command's errors."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.alloc import AllocatorOOM, CachingAllocator, parse_conf
from memprof.alloc.allocator import round_size
from memprof.base.errors import BadInput
from memprof.cli import run

MiB, GiB = 1 << 20, 1 << 30


def state(a: CachingAllocator) -> tuple[int, int, int, int]:
    s = a.memory_stats()
    return (s["allocated_bytes.all.current"], s["reserved_bytes.all.current"],
            s["inactive_split_bytes.all.current"], s["segment.all.current"])


@pytest.mark.parametrize(("request_bytes", "block", "segment"), [
    (1, 512, 2 * MiB),  # below 512 B: one 512-B block of a 2 MiB small segment
    (513, 1024, 2 * MiB),
    (MiB, MiB, 2 * MiB),  # the largest small request
    (MiB + 1, MiB + 512, 20 * MiB),  # large pool, under 10 MiB: a 20 MiB segment
    (10 * MiB - 1, 10 * MiB, 10 * MiB),
    (300 * MiB + 7, 300 * MiB + 512, 302 * MiB),  # 2 MiB rounding, 1.99 MiB remainder split off
])
def test_single_requests(request_bytes: int, block: int, segment: int) -> None:
    a = CachingAllocator()
    a.malloc(request_bytes)
    allocated, reserved, _inactive, segments = state(a)
    assert (allocated, reserved, segments) == (block, segment, 1)
    assert a.memory_stats()["requested_bytes.all.current"] == request_bytes


def test_max_split_size_keeps_an_oversize_block_whole() -> None:
    a = CachingAllocator("max_split_size_mb:128")
    a.malloc(300 * MiB + 7)
    assert state(a)[:2] == (302 * MiB, 302 * MiB)  # the remainder is not split: all counted
    assert a.memory_stats()["oversize_allocations.current"] == 1


@pytest.mark.parametrize(("request_bytes", "rounded"), [
    (MiB + 1, MiB + MiB // 4), (300 * MiB, 320 * MiB), (700 * MiB, 768 * MiB)])
def test_roundup_power2_divisions(request_bytes: int, rounded: int) -> None:
    assert round_size(request_bytes, parse_conf("roundup_power2_divisions:4")) == rounded


def test_roundup_intervals_form() -> None:
    c = parse_conf("roundup_power2_divisions:[64:8,256:4,>:1]")
    # torch: 64 names [64, 128) MiB (and fills below it), 256 names [256, 512), so 100 MiB
    # gets 8 and 128-256 MiB is not rounded (tests/alloc/test_roundup.py)
    assert c.divisions(2 * MiB) == 8 and c.divisions(100 * MiB) == 8
    assert c.divisions(200 * MiB) == 0 and c.divisions(300 * MiB) == 4
    assert c.divisions(2 * GiB) == 1 and c.divisions(4096) == 8


def test_split_merge_and_inactive_split() -> None:
    a = CachingAllocator()
    h1, h2 = a.malloc(100 * MiB), a.malloc(100 * MiB)
    assert state(a) == (200 * MiB, 200 * MiB, 0, 2)
    a.free(h1)
    h3 = a.malloc(40 * MiB)  # best fit: the free 100 MiB block is split (remainder > 1 MiB)
    assert state(a) == (140 * MiB, 200 * MiB, 60 * MiB, 2)
    a.free(h3)  # merges back into one whole block: nothing inactive-split
    assert state(a) == (100 * MiB, 200 * MiB, 0, 2)
    a.free(h2)
    a.empty_cache()
    assert state(a) == (0, 0, 0, 0)


def test_a_large_block_is_handed_out_whole_when_the_rest_is_under_1_mib() -> None:
    a = CachingAllocator()
    h = a.malloc(100 * MiB)
    a.free(h)
    a.malloc(100 * MiB - 512 * 1024)  # 512 KiB left: not split, the whole block is allocated
    assert state(a)[0] == 100 * MiB


def test_oom_retry_frees_cached_blocks_then_raises_with_torch_figures() -> None:
    a = CachingAllocator(total_bytes=10 * GiB)
    h = a.malloc(6 * GiB)
    a.free(h)  # cached, not returned
    a.malloc(8 * GiB)  # needs the cache released: one retry
    assert a.memory_stats()["num_alloc_retries"] == 1
    with pytest.raises(AllocatorOOM) as exc:
        a.malloc(4 * GiB)
    assert "Tried to allocate 4.00 GiB" in exc.value.message
    assert a.memory_stats()["num_ooms"] == 1


def test_memory_fraction_limits_reserved() -> None:
    a = CachingAllocator(total_bytes=100 * GiB)
    a.set_memory_fraction(0.1)
    a.malloc(9 * GiB)
    with pytest.raises(AllocatorOOM):
        a.malloc(2 * GiB)


def test_garbage_collection_frees_old_cached_blocks_under_a_fraction() -> None:
    a = CachingAllocator("garbage_collection_threshold:0.5", total_bytes=10 * GiB)
    a.set_memory_fraction(1.0)
    handles = [a.malloc(2 * GiB) for _ in range(3)]
    for h in handles:
        a.free(h)
    a.malloc(3 * GiB)  # a miss with 6 GiB cached above the 5 GiB threshold: GC releases the
    assert state(a)[1] == 3 * GiB  # aged whole blocks before cudaMalloc, no retry needed
    assert a.memory_stats()["num_alloc_retries"] == 0


def test_expandable_segments_map_pages_and_unmap_on_empty_cache() -> None:
    a = CachingAllocator("expandable_segments:True")
    h = a.malloc(300 * MiB + 7)
    allocated, reserved, inactive, segments = state(a)
    assert allocated == 300 * MiB + 512 and reserved == 320 * MiB  # 16 pages of 20 MiB
    assert segments == 0 and inactive == 0
    a.free(h)
    a.empty_cache()
    assert state(a) == (0, 0, 0, 0)


def test_private_pool_keeps_its_high_water_mark_while_its_graph_lives() -> None:
    a = CachingAllocator()
    a.begin_capture(1)
    h = a.malloc(50 * MiB)
    a.free(h)
    a.end_capture()
    a.empty_cache()
    assert state(a)[1] == 50 * MiB  # the graph still owns its pool
    h2 = a.malloc(50 * MiB)  # not served from the private pool
    assert state(a)[1] == 100 * MiB
    a.free(h2)
    a.release_pool(1)
    a.empty_cache()
    assert state(a)[1] == 0


def test_snapshot_segments_sum_to_reserved() -> None:
    a = CachingAllocator()
    hs = [a.malloc(n) for n in (100, 5 * MiB, 300 * MiB, 3000)]
    a.free(hs[1])
    assert sum(int(s["total_size"]) for s in a.snapshot()) == state(a)[1]  # type: ignore[call-overload]


ops = st.lists(st.tuples(st.sampled_from("aaf"), st.integers(1, 3 * GiB // 8)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops, st.sampled_from(["", "expandable_segments:True", "max_split_size_mb:64",
                             "roundup_power2_divisions:[64:8,>:2]"]))
def test_invariants(seq: list[tuple[str, int]], conf: str) -> None:
    a = CachingAllocator(conf)
    live: list[int] = []
    for kind, n in seq:
        if kind == "a" or not live:
            live.append(a.malloc(n))
        else:
            a.free(live.pop(n % len(live)))
        allocated, reserved, inactive, _ = state(a)
        assert 0 <= allocated <= reserved and 0 <= inactive <= reserved - allocated
        assert sum(int(s["total_size"]) for s in a.snapshot()) == reserved  # type: ignore[call-overload]
    for h in live:
        a.free(h)
    assert (state(a)[0] == 0 and state(a)[2] == 0) or conf.startswith("expandable")
    a.empty_cache()
    assert state(a) == (0, 0, 0, 0)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_conf_text_is_a_config_or_bad_input(text: str) -> None:
    with contextlib.suppress(BadInput):  # anything else would fail the test
        parse_conf(text)


@pytest.mark.parametrize(("conf", "needle"), [
    ("bogus:1", "unknown allocator config key"), ("max_split_size_mb:abc", "max_split_size_mb"),
    ("roundup_power2_divisions:[64:3]", "powers of two"), ("expandable_segments:yes", "True"),
    ("garbage_collection_threshold:1.5", "(0, 1)"), ("max_split_size_mb", "no value")])
def test_bad_confs(conf: str, needle: str) -> None:
    with pytest.raises(BadInput, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_conf(conf)


def test_replay_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ops.json"
    f.write_text(json.dumps({"ops": [["a", 1, 1000], ["a", 2, 3 * MiB], ["f", 1], ["e"]]}))
    assert run(["alloc", "replay", str(f), "-f", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["states"][-1] == [3 * MiB, 20 * MiB, 17 * MiB, 1]
    for bad, needle in ((tmp_path, "is a folder"), (tmp_path / "missing.json", "does not exist"),
                        ("notjson", "neither JSON nor a pickle"), ('{"ops": [["x"]]}', "op 0"),
                        ('{"ops": [["f", 3]]}', "not allocated"), ("\x80\x04garbage", "pickle")):
        if isinstance(bad, str):
            p = tmp_path / "bad.bin"
            p.write_bytes(bad.encode("latin-1"))
            bad = p
        assert run(["alloc", "replay", str(bad)]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.startswith("error: ")
    assert run(["alloc", "replay", str(f), "--conf", "nope:1"]) == 2
