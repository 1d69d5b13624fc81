"""reports/gpu/graph-mixing-topology: the recorder built NCCL's graph-mixing nodes as meant (an
event-wait node a graph, an event-record node a collective, kernels only where the case has no
event nodes), and the one case that ran on a fresh driver pool agrees with memprof's per-graph and
per-node driver costs. The other cases' memory figures are not per-case costs (README.md)."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.core.terms.cudagraph import GRAPH_DRIVER_PER_GRAPH, GRAPH_DRIVER_PER_KERNEL_NODE

GOLD = (Path(__file__).parent.parent / "reports" / "gpu" / "graph-mixing-topology"
        / "graph-mixing-topology-h100.json")


def _runs() -> list[dict]:  # type: ignore[type-arg]
    doc = json.loads(GOLD.read_text())
    assert "580." in doc["machine"]["nvidia_smi"]
    runs: list[dict] = doc["runs"]  # type: ignore[type-arg]
    return runs


def test_every_case_built_the_nodes_it_names() -> None:
    runs = _runs()
    assert len(runs) == 15
    for r in runs:
        k, case = r["k"], r["case"]
        want = {"kernel": 2 * k}
        if case in ("wait", "inline", "leaf"):
            want["wait_event"] = 1
        if case in ("inline", "leaf"):
            want["event_record"] = k
        assert r["nodes_one_graph"] == want, (case, k)


def test_the_first_case_matches_the_driver_constants() -> None:
    first = _runs()[0]
    assert (first["case"], first["k"], first["graphs"]) == ("plain", 1, 200)
    assert first["reserved_delta_bytes"] <= 2 * 1024 * 1024  # the tensor's one pool segment
    model = GRAPH_DRIVER_PER_GRAPH + 2 * GRAPH_DRIVER_PER_KERNEL_NODE
    assert abs(first["driver_bytes_per_graph"] - model) / model < 0.15


def test_later_cases_reused_earlier_cases_memory() -> None:
    # why the README reads no per-case cost: nothing went back after any case, and most later
    # cases read 0 B although every one built at least as many nodes as the first
    runs = _runs()
    assert all(r["returned_bytes"] == 0 for r in runs)
    assert sum(r["driver_bytes"] == 0 for r in runs[1:]) >= 10
