"""The graph memory of NCCL all-reduce nodes over host shared memory (``NCCL_P2P_DISABLE=1``,
the transport NCCL takes between GPUs without peer access), read from the golden
``reports/gpu/nccl/graph-collectives-2x-h100-shm.json`` (``recorders/gpu_graph_collectives.py
--transport shm`` on 2× H100, NCCL 2.28.9) against the P2P goldens beside it: a captured
``ncclAllReduce`` costs the driver the same bytes over SHM as over NVLink P2P, back to back and
after a kernel, so ``cudagraph``'s per-node constants hold for both transports."""

from __future__ import annotations

import json
from pathlib import Path

from memprof.core.terms import cudagraph

GOLD = Path(__file__).resolve().parent.parent / "reports" / "gpu" / "nccl"
SHAPES = ("1x4096", "64x4096", "256x5120")


def _doc(name: str) -> dict:
    return json.loads((GOLD / name).read_text())


def _per_node(run: dict, shape: str) -> float:
    """Driver bytes per node: (64-node case − 1-node case) / 63 / graphs, rank 0."""
    cases = {c["case"]: c for c in run["ranks"][0]["cases"]}
    one, many = cases[f"{shape}, 1 nodes"], cases[f"{shape}, 64 nodes"]
    return (many["driver_bytes"] - one["driver_bytes"]) / 63 / one["graphs"]


def _runs(doc: dict, kind: str) -> dict[str, dict]:
    return {r["env"]["NCCL_CUMEM_ENABLE"]: r for r in doc["runs"] if r["kind"] == kind}


def test_the_shm_golden_ran_over_shm() -> None:
    doc = _doc("graph-collectives-2x-h100-shm.json")
    assert doc["transport"] == "shm" and "--transport shm" in doc["command"]
    assert {(r["kind"], r["env"]["NCCL_CUMEM_ENABLE"]) for r in doc["runs"]} == {
        (k, c) for k in ("pynccl", "pynccl_add", "local") for c in ("0", "1")}
    for run in doc["runs"]:
        assert run["exit_code"] == 0 and run["env"]["NCCL_P2P_DISABLE"] == "1"
        assert run["nccl"] == "2.28.9" and "H100" in run["gpu"]
        if run["kind"] != "local":  # NCCL's channels went through SHM, none through P2P
            via = [ln for ln in run["nccl_log"] if " via " in ln]
            assert via and all("via SHM" in ln for ln in via), run["kind"]
        r0, r1 = run["ranks"]
        for a, b in zip(r0["cases"], r1["cases"], strict=True):
            assert a["ok"] and b["ok"] and "error" not in a
            assert a["driver_bytes"] == b["driver_bytes"], (run["kind"], a["case"])


def test_an_nccl_node_over_shm_costs_what_it_costs_over_p2p() -> None:
    shm = _runs(_doc("graph-collectives-2x-h100-shm.json"), "pynccl")
    p2p = _runs(_doc("graph-collectives-2x-h100.json"), "pynccl")
    for cumem in ("0", "1"):
        # hand count, 1x4096: (167,772,160 − 31,457,280) B / 63 / 250 graphs = 8,655 B
        assert round(_per_node(shm[cumem], "1x4096")) == cudagraph.GRAPH_DRIVER_PER_NCCL_NODE
        for shape in SHAPES:  # to the byte, every shape, cuMem on and off
            assert _per_node(shm[cumem], shape) == _per_node(p2p[cumem], shape), (cumem, shape)


def test_an_nccl_node_after_a_kernel_over_shm_matches_the_p2p_chains() -> None:
    """``pynccl_add`` (an add, then the all-reduce) against the P2P chains of the scaling golden
    (PyNccl-style all-reduce after an add, k = 1 → 128 nodes, 64 graphs): the graph mixing
    support's cost does not depend on the transport."""
    doc = _doc("graph-collectives-2x-h100-shm.json")
    add, local = _runs(doc, "pynccl_add"), _runs(doc, "local")
    scaling = _doc("graph-collectives-scaling-2x-h100.json")
    (section,) = [s for s in scaling["sections"] if s["name"] == "scaling"][:1]
    chain = {c["k"]: c for c in section["ranks"][0]["cases"]
             if c["impl"] == "pynccl" and c["between"] == "add"}
    # hand count: (1,040,187,392 − 14,680,064) B / 127 / 64 graphs = 126,170 B an (add, all-reduce)
    p2p = (chain[128]["driver_bytes"] - chain[1]["driver_bytes"]) / 127 / chain[1]["graphs"]
    assert round(p2p) == 126_170
    for cumem in ("0", "1"):
        for shape in SHAPES:
            shm = _per_node(add[cumem], shape)
            assert abs(shm - p2p) <= 0.005 * p2p, (cumem, shape, shm)
            # far above the add alone: the NCCL node after a kernel is the mixing case
            nccl = shm - _per_node(local[cumem], shape)
            assert 123_000 <= nccl <= 124_000, (cumem, shape, nccl)
            assert nccl > 14 * cudagraph.GRAPH_DRIVER_PER_NCCL_NODE
