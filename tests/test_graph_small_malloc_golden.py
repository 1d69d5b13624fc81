"""reports/gpu/graph-small-malloc: small cudaMalloc calls are packed into 2 MiB pages at their own
size (the cost of NCCL 2.21.5's per-captured-collective work buffer, nWork × 512 B), and the bound
the README draws from it for the published 0.8.4 TP2 rows."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.base.units import MiB

GOLD = (Path(__file__).parent.parent / "reports" / "gpu" / "graph-small-malloc"
        / "graph-small-malloc-h100.json")
PAGE = 2 * MiB
NCCL_WORK_SIZE = 512  # NCCL v2.21.5-1 src/include/device.h
MAXCHANNELS = 32  # NCCL v2.21.5-1 src/include/device.h


def _runs() -> dict[tuple[int, int], dict[str, int]]:
    doc = json.loads(GOLD.read_text())
    assert "580." in doc["gpu_and_driver"]
    return {(r["size"], r["count"]): r for r in doc["runs"]}


def test_small_allocations_are_packed_at_their_size() -> None:
    runs = _runs()
    for size in (512, 1024, 2048, 4096, 8192, 16384):
        assert runs[(size, 1)]["delta_bytes"] == PAGE  # the first opens a page
        many = runs[(size, 4000)]
        assert many["delta_bytes"] == -(-size * 4000 // PAGE) * PAGE
        assert many["after_free_delta_bytes"] == 0


def test_bound_for_the_084_tp2_rows() -> None:
    # 67 capture sizes × 57 PyNccl all-reduces (tests/test_graph_log_v08.py), each keeping
    # nWork × 512 B at NCCL 2.21.5: at most 32 channels' worth
    collectives = 67 * 57
    assert collectives * NCCL_WORK_SIZE <= 2 * MiB
    assert collectives * MAXCHANNELS * NCCL_WORK_SIZE <= 60 * MiB
