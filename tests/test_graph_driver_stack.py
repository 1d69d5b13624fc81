"""The driver stack the graph executables are costed at (``cudagraph.DRIVER_STACK``): a vLLM
release whose PyPI wheel is built for CUDA 12.x (before 0.20.0) has its kernel nodes at NVIDIA's
published ~10 KB a node (NVIDIA/cccl#3768), one built for CUDA 13 (0.20.0 on: driver R580 or
later) at R580's measured costs; the per-graph cost is R580's in both. Counted by hand."""

from __future__ import annotations

import pytest

from memprof.base.units import KiB
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate, rank_context
from memprof.core.graph_log import GRAPH_LOG_RULES, logged_graph
from memprof.core.terms.cudagraph import (
    DRIVER_STACK,
    GRAPH_DRIVER_PER_GEMM_NODE,
    GRAPH_DRIVER_PER_GRAPH,
    GRAPH_DRIVER_PER_KERNEL_NODE,
    GRAPH_DRIVER_PER_NODE_CUDA12,
    cudagraph_model,
    driver_stack,
    graph_driver_bytes,
)
from memprof.core.terms.runner_v1_capture import profiled_graph_driver_bytes
from memprof.core.versions import value_at

# Qwen3-0.6B at 0.10.1 (V1, PIECEWISE only): 28 decoder layers, 29 pieces a size; a GQA layer's
# projections (qkv, o_proj) and dense MLP (gate_up, down) are 4 GEMMs, its add+RMSNorm, rotary,
# SiLU-and-mul and add+RMSNorm 4 other kernels; the attention op is outside PIECEWISE graphs
LAYERS = 28


def _ctx(version: str, engine: str = "vllm",
         model: str = "qwen3-0.6b") -> tuple[Estimate, TermContext]:
    dep = (Deployment(engine_version=version, max_num_seqs=64) if engine == "vllm"
           else Deployment(engine=engine))
    e = estimate(model, dep, gpu_name="H100")
    return e, rank_context(e, e.ranks[0])


@pytest.mark.parametrize(("version", "stack"), [("0.7.3", "cuda12"), ("0.9.2+v0", "cuda12"),
                                                ("0.10.1", "cuda12"), ("0.19.1", "cuda12"),
                                                ("0.20.0", "cuda13"), ("0.33.0", "cuda13")])
def test_stack_by_release(version: str, stack: str) -> None:
    assert value_at(DRIVER_STACK, version) == stack
    # Qwen2.5 where the release's model registry has no Qwen3ForCausalLM (before 0.8.4)
    model = "qwen2.5-0.5b" if version == "0.7.3" else "qwen3-0.6b"
    assert driver_stack(_ctx(version, model=model)[1]) == stack


def test_one_size_by_hand_at_both_stacks() -> None:
    _e, old = _ctx("0.10.1")
    pieces = LAYERS + 1
    gemm, other = 4 * LAYERS, 4 * LAYERS
    assert graph_driver_bytes(old, "PIECEWISE", 1) == (
        pieces * GRAPH_DRIVER_PER_GRAPH + (gemm + other) * 10 * KiB)
    assert 10 * KiB == GRAPH_DRIVER_PER_NODE_CUDA12  # NVIDIA/cccl#3768: "around 10KB"
    _e, new = _ctx("0.20.0")
    # 0.20.0: FULL_AND_PIECEWISE; the PIECEWISE graphs of a size have the same nodes
    assert graph_driver_bytes(new, "PIECEWISE", 1) == (
        pieces * GRAPH_DRIVER_PER_GRAPH + gemm * GRAPH_DRIVER_PER_GEMM_NODE
        + other * GRAPH_DRIVER_PER_KERNEL_NODE)


def test_the_logged_figure_says_which_stack() -> None:
    # the logged figure's executables are the graph model's driver memory (a TP1 rank at 0.19.1:
    # the model runner made the stream pool before the window) less what the graphs captured
    # and destroyed while profiling left (runner_v1_capture), and the line names the source
    e, ctx = _ctx("0.19.1")
    g = logged_graph(e, e.ranks[0])
    assert g is not None
    m = cudagraph_model(ctx)
    parts = {n: b for n, b, _w in g.parts}
    profiled, _counts = profiled_graph_driver_bytes(ctx)
    assert parts["graph executables"] == m.driver - profiled  # no stream pool here
    assert any("NVIDIA/cccl#3768" in w for _n, _b, w in g.parts)
    e2, _ctx2 = _ctx("0.20.0")
    g2 = logged_graph(e2, e2.ranks[0])
    assert g2 is not None and not any("cccl" in w for _n, _b, w in g2.parts)


def test_other_engines_keep_the_measured_costs() -> None:
    _e, ctx = _ctx("", engine="sglang")
    assert driver_stack(ctx) == "cuda13"


def test_listed_with_the_logged_figure_rules() -> None:
    assert DRIVER_STACK in GRAPH_LOG_RULES
    for r in DRIVER_STACK:
        assert r.source.strip() and r.introduced_by.strip()
