"""memprof's driver cost of captured graphs against a vLLM-style piecewise capture of
Inductor-compiled pieces on one H100 (reports/gpu/graph-pieces/graph-pieces-h100.json, made by
recorders/gpu_graph_pieces.py; the folder's README has the table)."""

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

GOLDEN = (Path(__file__).parent.parent / "reports" / "gpu" / "graph-pieces"
          / "graph-pieces-h100.json")
DATA: dict[str, Any] = json.loads(GOLDEN.read_text())
CASES = [c for c in DATA["cases"] if "failed" not in c]
# kernels the profiler counted that are not the piece's: its inputs, made inside the profiler's
# window (two torch.zeros fills and one arange; the README)
INPUT_KERNELS = 3
GEMMS_A_PIECE = 4  # o_proj, gate_up, down and the next layer's qkv


def _case(mode: str, prewarm: bool) -> dict[str, Any]:
    return next(c for c in CASES if c["mode"] == mode and c["prewarm"] == prewarm
                and c["layers"] == 16 and c["sizes"] == 67)


def test_golden_states_its_run() -> None:
    assert DATA["gpu"] == "NVIDIA H100 80GB HBM3"
    assert DATA["torch"].startswith("2.11.0")
    assert "recorders/gpu_graph_pieces.py" in DATA["command"]
    assert len(CASES) == 4


@pytest.mark.parametrize("mode", ["compiled", "eager"])
def test_driver_formula_matches_the_measured_rest_per_graph(mode: str) -> None:
    """What the window took beyond the pool's reserved bytes, per graph, is memprof's per-graph
    cost plus its per-node costs for the piece's kernels (4 GEMMs, the rest other kernels),
    within 6%: 146,830 B against 145,457 B compiled, 236,920 B against 250,406 B eager."""
    c = _case(mode, prewarm=False)
    other = c["kernels_per_piece"] - INPUT_KERNELS - GEMMS_A_PIECE
    predicted = (GRAPH_DRIVER_PER_GRAPH + GEMMS_A_PIECE * GRAPH_DRIVER_PER_GEMM_NODE
                 + other * GRAPH_DRIVER_PER_KERNEL_NODE)
    measured = (c["total_bytes"] - c["reserved_bytes"]) / c["graphs"]
    assert abs(predicted - measured) / measured < 0.06
    assert c["graphs"] == 67 * 17  # 67 sizes x (16 attention layers + 1) pieces


def test_inductor_piece_is_fewer_kernels_than_the_eager_one() -> None:
    compiled, eager = _case("compiled", False), _case("eager", False)
    assert compiled["kernels_per_piece"] - INPUT_KERNELS == 13
    assert eager["kernels_per_piece"] - INPUT_KERNELS == 52
    assert compiled["total_bytes"] < eager["total_bytes"]


@pytest.mark.parametrize("mode", ["compiled", "eager"])
def test_warmups_inside_the_window_leave_no_loaded_kernels(mode: str) -> None:
    """Prewarming every size before the window (so that no kernel is first launched, and
    loaded, inside it) changes the logged figure by one 2 MiB granule at most."""
    inside, before = _case(mode, False), _case(mode, True)
    assert 0 <= inside["total_bytes"] - before["total_bytes"] <= 2 * 2**20
    assert inside["reserved_bytes"] == before["reserved_bytes"]
