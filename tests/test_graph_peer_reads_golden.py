"""CUDA graphs whose all-reduce stand-in reads a peer's memory through CUDA IPC cost what local
ones do, and registering their pool segments with the peer (vLLM's custom all-reduce
``register_graph_buffers``) costs no device memory (reports/gpu/graph-peer-reads/, made by
recorders/gpu_graph_peer_reads.py on 2 GPUs joined by NVLink, driver R580)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from memprof.core.terms.cudagraph import (
    GRAPH_DRIVER_PER_GRAPH,
    GRAPH_DRIVER_PER_KERNEL_NODE,
    GRAPH_DRIVER_PER_NODE_CUDA12,
)

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "reports" / "gpu" / "graph-peer-reads"
MiB = 1 << 20
GRANULE = 2 * MiB  # the driver grows its graph memory in 2 MiB steps


def _record(rank: int) -> dict:
    rec = json.loads((GOLDEN / f"graph-peer-reads-rank{rank}.json").read_text())
    assert rec["rank"] == rank
    return rec


def _driver(rank: int) -> dict[tuple[str, int], int]:
    return {(c["case"], c["nodes"]): c["driver_bytes"] for c in _record(rank)["cases"]}


def test_both_ranks_read_the_same() -> None:
    assert _driver(0) == _driver(1)


@pytest.mark.parametrize("rank", [0, 1])
def test_registering_the_graph_buffers_costs_nothing(rank: int) -> None:
    for c in _record(rank)["cases"]:
        if not c["register"]:
            continue
        assert c["handles_opened"] > 0
        captured, registered = c["readings"][1], c["readings"][2]
        assert registered[0] == captured[0]  # bytes in use on the GPU unchanged


@pytest.mark.parametrize("rank", [0, 1])
def test_a_peer_reading_node_costs_what_a_local_one_does(rank: int) -> None:
    d = _driver(rank)
    graphs = _record(rank)["cases"][0]["graphs"]
    for nodes in (1, 32):
        local = d[("local, peer access on", nodes)]
        for case in ("peer read", "peer read + register", "local, no peer access yet"):
            assert abs(d[(case, nodes)] - local) <= 2 * GRANULE
    # the slope a node stays R580's measured cost, far below the ~10 KiB of the CUDA 12.x rule
    for case in ("local, peer access on", "peer read", "peer read + register"):
        per_node = (d[(case, 32)] - d[(case, 1)]) / 31 / graphs
        assert abs(per_node - GRAPH_DRIVER_PER_KERNEL_NODE) < 0.2 * GRAPH_DRIVER_PER_KERNEL_NODE
        assert per_node < GRAPH_DRIVER_PER_NODE_CUDA12 / 3
        per_graph = d[(case, 1)] / graphs
        assert abs(per_graph - GRAPH_DRIVER_PER_GRAPH) < 0.25 * GRAPH_DRIVER_PER_GRAPH


def test_replay_adds_nothing() -> None:
    for c in _record(0)["cases"]:
        assert c["readings"][-1][0] == c["readings"][-2][0]


def test_the_recorder_is_the_one_the_readme_names() -> None:
    digest = hashlib.sha256(
        (ROOT / "recorders" / "gpu_graph_peer_reads.py").read_bytes()).hexdigest()
    assert digest in (GOLDEN / "README.md").read_text()
