"""An allocation a peer holds open through CUDA IPC keeps its device memory after its owner frees
it, until the peer closes the handle (reports/gpu/ipc-free-open/, made by
recorders/gpu_ipc_free_open.py on 2 GPUs joined by NVLink). torch's reserved bytes drop at the
free, so the memory that stays reads as non-torch memory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "reports" / "gpu" / "ipc-free-open"
MiB = 1 << 20
# readings per case: start, allocated (or captured), peer opened, owner freed, peer closed;
# each [bytes in use on the GPU, torch's memory_reserved]
START, MADE, OPENED, FREED, CLOSED = range(5)


def _cases(rank: int) -> dict[str, list[list[int]]]:
    rec = json.loads((GOLDEN / f"ipc-free-open-rank{rank}.json").read_text())
    assert rec["rank"] == rank
    assert all(code == 0 for c in rec["cases"] for code in c["codes"])
    return {c["kind"]: c["readings"] for c in rec["cases"]}


@pytest.mark.parametrize("rank", [0, 1])
def test_a_freed_allocation_stays_while_a_peer_maps_it(rank: int) -> None:
    r = _cases(rank)["driver 4 x 20 MiB"]
    used = [x[0] for x in r]
    assert used[MADE] - used[START] == 4 * 20 * MiB  # the reading sees the allocation
    assert used[OPENED] == used[MADE]  # opening costs nothing (reports/gpu/ipc-open)
    assert used[FREED] == used[OPENED]  # the owner's free gives nothing back ...
    assert used[CLOSED] == used[START]  # ... until the peer closes


@pytest.mark.parametrize("rank", [0, 1])
def test_a_freed_graph_pool_segment_stays_as_non_torch_memory(rank: int) -> None:
    r = _cases(rank)["graph pool 64 MiB"]
    used = [x[0] for x in r]
    reserved = [x[1] for x in r]
    segment = 64 * MiB
    # empty_cache returns the pool's segments to torch's count at once ...
    assert reserved[OPENED] - reserved[FREED] >= segment
    assert reserved[FREED] == reserved[START]
    # ... but the segment the peer maps stays in use on the device: non-torch (used - reserved)
    # grows by it, and leaves at the peer's close
    non_torch = [u - res for u, res in zip(used, reserved, strict=True)]
    assert used[OPENED] - used[FREED] < segment
    assert non_torch[FREED] - non_torch[OPENED] >= segment
    assert used[FREED] - used[CLOSED] == segment


def test_the_recorder_is_the_one_the_readme_names() -> None:
    digest = hashlib.sha256((ROOT / "recorders" / "gpu_ipc_free_open.py").read_bytes()).hexdigest()
    assert digest in (GOLDEN / "README.md").read_text()
