"""Opening a peer's CUDA IPC handle holds no device memory (reports/gpu/ipc-open/, made by
recorders/gpu_ipc_open.py on 4 GPUs joined by NVLink): the custom all-reduce's mapping of its peers'
buffers and its registration of a capture's graph inputs cost nothing beyond the buffers it
allocates itself, which is what memprof charges at every TP size."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "reports" / "gpu" / "ipc-open"


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_opening_peer_handles_holds_no_device_memory(rank: int) -> None:
    rec = json.loads((GOLDEN / f"ipc-open-rank{rank}.json").read_text())
    assert rec["world"] == 4 and rec["rank"] == rank
    for case in rec["cases"]:
        # the reading sees what the rank allocates itself, to the byte ...
        assert case["alloc_used_bytes"] == case["segment_bytes"] * case["segments_per_rank"]
        assert case["free_used_bytes"] == -case["alloc_used_bytes"]
        # ... and nothing for the handles, the opens (the first, lazy peer access, included)
        assert case["opened_here"] == case["segments_per_rank"] * case["peers"]
        for step in ("get_handle_used_bytes", "exchange_used_bytes", "rank0_opens_used_bytes",
                     "all_open_used_bytes", "close_used_bytes"):
            assert case[step] == 0, (case, step)
    assert max(c["opened_here"] for c in rec["cases"]) >= 1536


def test_the_recorder_is_the_one_the_readme_names() -> None:
    digest = hashlib.sha256((ROOT / "recorders" / "gpu_ipc_open.py").read_bytes()).hexdigest()
    assert digest in (GOLDEN / "README.md").read_text()


def _custom_ar(tp: int) -> int:
    """The custom all-reduce buffers' bytes on one rank at ``tp``."""
    e = estimate("qwen3-32b", Deployment(tp=tp, engine_version="0.10.1.1"), gpu_name="H100")
    comps = e.ranks[0].components
    ar = [c.bytes for c in comps if c.name.startswith("custom all-reduce buffers")]
    assert len(ar) == 1
    return ar[0]


def test_the_custom_all_reduce_costs_the_same_whatever_the_peers() -> None:
    """Its buffers are its own allocations; the peers' it maps (one more peer per rank at each
    step) add nothing, as measured."""
    assert len({_custom_ar(tp) for tp in (2, 4, 8)}) == 1
