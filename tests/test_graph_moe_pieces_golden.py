"""memprof's driver cost of captured graphs against a vLLM-style piecewise capture of a fused-MoE
stack on one H100 (reports/gpu/graph-moe-pieces/graph-moe-pieces-h100.json, made by
recorders/gpu_graph_moe_pieces.py; the folder's README has the table): a piece holding an MoE
layer's kernels costs what the per-graph and per-node constants say, on the card and driver they
were measured on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memprof.core.terms.cudagraph import (
    GRAPH_DRIVER_PER_GEMM_NODE,
    GRAPH_DRIVER_PER_GRAPH,
    GRAPH_DRIVER_PER_KERNEL_NODE,
)

GOLDEN = (Path(__file__).parent.parent / "reports" / "gpu" / "graph-moe-pieces"
          / "graph-moe-pieces-h100.json")
DATA: dict[str, Any] = json.loads(GOLDEN.read_text())
# kernels the profiler counted that are not the piece's: its inputs, made inside the profiler's
# window (two torch.zeros fills and the positions' arange; the README)
INPUT_KERNELS = 3


def _case(mode: str, layers: int) -> dict[str, Any]:
    return next(c for c in DATA["cases"] if c["mode"] == mode and c["layers"] == layers)


def _gemms(c: dict[str, Any]) -> int:
    """cuBLAS's GEMM kernels of the piece (``nvjet_sm90_*``: o_proj, the router, the two expert
    GEMMs, qkv); cuBLAS's split-K reduction counts as another kernel."""
    return sum(n.startswith("nvjet_") for n in c["kernel_names"])


def _rest_per_graph(c: dict[str, Any]) -> float:
    return float(c["total_bytes"] - c["reserved_bytes"]) / c["graphs"]


def test_golden_states_its_run() -> None:
    assert DATA["gpu"] == "NVIDIA H100 80GB HBM3"
    assert DATA["torch"].startswith("2.11.0")
    assert DATA["driver"] == "580.159.04"
    assert "recorders/gpu_graph_moe_pieces.py" in DATA["command"]
    assert [(c["mode"], c["layers"], c["graphs"]) for c in DATA["cases"]] == [
        ("compiled", 16, 67 * 17), ("eager", 16, 67 * 17), ("compiled", 4, 67 * 5)]


def test_the_moe_ran_inside_the_pieces() -> None:
    """The routing's softmax and top-k and the five GEMMs are in the profiled piece."""
    for c in DATA["cases"]:
        names = c["kernel_names"]
        assert any("softmax" in n for n in names)
        assert any("gatherTopK" in n for n in names)
        assert _gemms(c) == 5


@pytest.mark.parametrize("mode", ["compiled", "eager"])
def test_driver_formula_matches_the_measured_rest_per_graph(mode: str) -> None:
    """What the window took beyond the pool's reserved bytes, per graph, is memprof's per-graph
    cost plus its per-node costs for the piece's kernels (5 GEMMs, the rest other kernels and
    memcpy nodes), within 6%: 189,450 B against 189,646 B compiled, 314,190 B against 329,579 B
    eager."""
    c = _case(mode, 16)
    gemm = _gemms(c)
    other = c["kernels_per_piece"] - INPUT_KERNELS - gemm
    predicted = (GRAPH_DRIVER_PER_GRAPH + gemm * GRAPH_DRIVER_PER_GEMM_NODE
                 + other * GRAPH_DRIVER_PER_KERNEL_NODE)
    measured = _rest_per_graph(c)
    assert abs(predicted - measured) / measured < 0.06


def test_cost_grows_with_the_graphs_not_a_fixed_charge() -> None:
    """16 against 4 layers, the same pieces: the 804 graphs more cost what each graph's rest
    is, within 1% (no per-capture fixed cost hides in the per-graph figure)."""
    big, small = _case("compiled", 16), _case("compiled", 4)
    slope = ((big["total_bytes"] - big["reserved_bytes"])
             - (small["total_bytes"] - small["reserved_bytes"])) / (big["graphs"] - small["graphs"])
    assert abs(slope - _rest_per_graph(big)) / _rest_per_graph(big) < 0.01
