"""The driver placement model (memprof.alloc.va) against every segment address an H200 gave
(tests/data/alloc_golden/alloc-addresses.json.gz, ``recorders/alloc_addresses.py``): each of
the 930 segments of the six non-expandable sequences is placed where the driver placed it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from memprof.alloc.va import DriverVA

DATA = Path(__file__).resolve().parents[1] / "data" / "alloc_golden" / "alloc-addresses.json.gz"
RUNS = json.loads(gzip.decompress(DATA.read_bytes()))["runs"]
# run -> segments the driver created there
SEGMENTS = {"default/random": 80, "default/model_run": 108, "default/per_layer": 175,
            "mss128-rp4/random": 284, "mss128-rp4/model_run": 108, "mss128-rp4/per_layer": 175}


def replay(run: dict[str, object]) -> int:
    """Feed the GPU's segment creations and frees to the model in order (its addresses shifted
    so its first segment is the GPU's); every segment must land where the GPU put it. Returns
    how many were placed."""
    segs = {int(k): v for k, v in run["segments"].items()}  # type: ignore[attr-defined]
    prev: set[tuple[int, int]] = set()
    va: DriverVA | None = None
    made = 0
    for k in sorted(segs):
        cur = {(int(a), int(s)) for a, s in segs[k]}
        gone, new = sorted(prev - cur), sorted(cur - prev)
        if va is None:  # the arena's start: where the model puts the first segment, moved
            va = DriverVA(base=new[0][0] - DriverVA(base=0).malloc(new[0][1]))
        for a, _ in gone:
            va.free(a)
        for a, s in new:
            assert va.malloc(s) == a, f"op {k}: a {s:,} B segment placed elsewhere"
            made += 1
        prev = cur
    return made


@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_placements_as_recorded(name: str) -> None:
    assert replay(RUNS[name]) == SEGMENTS[name]


def test_a_fresh_model_fills_the_arena_then_takes_chunks_top_down() -> None:
    MiB = 1 << 20
    va = DriverVA()
    base = va.base
    assert va.malloc(2 * MiB) == base  # the arena's first free range
    assert va.malloc(20 * MiB) == base + 74 * MiB  # its second
    big = va.malloc(384 * MiB)
    assert big == base - 414 * MiB - 384 * MiB  # a chunk right below the ceiling
    small = va.malloc(454 * MiB)
    assert small == big - 480 * MiB  # 454 MiB takes a 480 MiB chunk below it
    va.free(big)
    va.free(small)  # every chunk given back: the space below the ceiling is free again
    assert va.malloc(360 * MiB) == big


def test_a_gap_of_exactly_the_chunks_size_is_passed_over() -> None:
    MiB = 1 << 20
    va = DriverVA()
    top = va.malloc(64 * MiB)  # [ceiling − 64, ceiling)
    mid = va.malloc(64 * MiB)
    low = va.malloc(64 * MiB)
    va.free(mid)  # a 64 MiB gap between two chunks
    assert va.malloc(64 * MiB) == low - 64 * MiB  # not into the gap: below it all
    assert va.malloc(32 * MiB) == mid + 32 * MiB  # a smaller chunk takes the gap's top
    assert top > mid > low
