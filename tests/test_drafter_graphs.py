"""The speculative drafter's CUDA graphs (memprof/core/terms/drafter_graphs.py and
cudagraph.py ``drafter_graph_nodes``): the V1 runner captures the EAGLE proposer's drafter at
each PIECEWISE capture size from vLLM 0.11.1 (v1/worker/gpu_model_runner.py ``_dummy_run`` ->
``drafter.dummy_run(use_cudagraphs=PIECEWISE)``), none in 0.11.0 (``set_forward_context``'s
NONE runtime mode), and vLLM's estimate from 0.18.0 samples them with the target's PIECEWISE
descriptors; Model Runner V2's speculator graphs are not modelled, and the estimate says so."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms import cudagraph
from memprof.core.terms.cudagraph import (
    GRAPH_DRIVER_PER_GRAPH,
    attention_nodes,
    cudagraph_model,
    drafter_driver_per_size,
    drafter_graph_nodes,
    linear_extra_nodes,
    mlp_nodes,
    node_costs,
)
from memprof.core.terms.drafter_graphs import drafter_captures, drafter_graph_note


def _ctx(model: str, version: str, **kw: object):  # type: ignore[no-untyped-def]
    dep = Deployment(engine_version=version, tp=8, num_speculative_tokens=1,
                     speculative_method="mtp", **kw)  # type: ignore[arg-type]
    e = estimate(model, dep, gpu_name="H200")
    return e, rank_context(e, e.ranks[0])


def _component(e, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in e.ranks[0].components if c.name == name)


@pytest.mark.parametrize("version", ["0.21.0", "0.28.0"])
def test_v1_mtp_drafter_pieces_by_hand(version: str) -> None:
    # DeepSeek-R1 (DeepseekV3ForCausalLM) runs the V1 runner at both releases. DeepSeekMTP
    # (compiled from 0.11.1) runs one MTP layer a forward: 2 pieces (its MLA attention + 1);
    # its nodes: the layer's attention and MoE as the target's layers count them, eh_proj
    # (1 GEMM) and the embedding gather, mask, enorm, hnorm and concatenation (5 kernels);
    # TP8 on an H200 runs the custom all-reduce: its 3 all-reduces (o_proj, MoE, the
    # vocabulary-parallel embedding) are kernel nodes. Both wheels are CUDA 13 (R580 costs).
    e, ctx = _ctx("deepseek-r1", version)
    assert drafter_captures(ctx) == "mtp"
    layer = ctx.spec.mtp_layers[0]
    extra = linear_extra_nodes(ctx)
    ag, ao = attention_nodes(ctx, layer, "PIECEWISE", extra)
    mg, mo = mlp_nodes(ctx, layer, extra)
    assert drafter_graph_nodes(ctx) == (2, ag + mg + 1, ao + mo + 5, 3)
    per_gemm, per_other = node_costs(ctx)
    assert (per_gemm, per_other) == (3350, 2310)
    want = 2 * GRAPH_DRIVER_PER_GRAPH + (ag + mg + 1) * 3350 + (ao + mo + 5 + 3) * 2310
    assert drafter_driver_per_size(ctx) == want
    # in the pool and in vLLM's estimate: every PIECEWISE size captures the drafter's pieces,
    # and profile_cudagraph_memory's two PIECEWISE samples hold them (the first and the
    # per-size sample, extrapolated over the n - 1 others)
    g = cudagraph_model(ctx)
    n = len(g.modes["PIECEWISE"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cudagraph, "drafter_captures", lambda _ctx: None)
        g0 = cudagraph_model(ctx)
    assert g.actual - g0.actual == n * want
    assert g.graphs - g0.graphs == 2 * n
    assert g.first_capture["PIECEWISE"] - g0.first_capture["PIECEWISE"] == want
    assert g.per_graph_sample["PIECEWISE"] - g0.per_graph_sample["PIECEWISE"] == want
    assert g.estimate - g0.estimate == n * want  # PIECEWISE's first sample is the larger
    assert _component(e, "CUDA-graph estimate").bytes == g.estimate
    assert "drafter's CUDA graphs: its PIECEWISE graphs" in _component(
        e, "CUDA-graph pool above the estimate").formula


def test_v1_drafter_graphs_by_release_and_class() -> None:
    # 0.11.0: dummy_run enters set_forward_context with the NONE runtime mode (and DeepSeekMTP
    # is not compiled): no drafter graph
    _e, old = _ctx("deepseek-r1", "0.11.0")
    assert drafter_captures(old) is None and drafter_graph_nodes(old) == (0, 0, 0, 0)
    assert "none captured at vLLM 0.11.0" in drafter_graph_note(old)
    # 0.11.1: captured (kernel nodes at the CUDA 12.x wheel's ~10 KiB)
    _e, first = _ctx("deepseek-r1", "0.11.1")
    assert drafter_captures(first) == "mtp" and drafter_driver_per_size(first) > 0
    # GLM-4.7 (glm4_moe)'s Glm4MoeMTP is not a compiled class: it runs eagerly
    _e, glm = _ctx("glm-4.7", "0.21.0")
    assert drafter_captures(glm) is None
    assert "not compiled" in drafter_graph_note(glm)
    # --enforce-eager captures nothing
    _e, eager = _ctx("deepseek-r1", "0.21.0", enforce_eager=True)
    assert drafter_captures(eager) is None


def test_v2_speculator_graphs_are_said_not_modelled() -> None:
    # Model Runner V2 (0.33.0) captures its speculator's prefill (and, with k > 1, decode)
    # graphs inside capture_model: not modelled, so the V2 estimate is the target's alone and
    # its formula says so
    e, ctx = _ctx("deepseek-r1", "0.33.0")
    assert drafter_captures(ctx) is None
    est = _component(e, "CUDA-graph estimate")
    assert "speculator graphs (draft prefill, and draft decode" in est.formula


def test_v1_eagle3_head_pieces_by_hand() -> None:
    # an EAGLE-3 head (llama_eagle3.py: @support_torch_compile) of one layer drafting for
    # Qwen3-8B at TP1, vLLM 0.21.0 (V1 runner for Qwen3 there): 2 pieces, its layer's
    # attention and dense MLP as a GQA decoder layer's (2 + 2 GEMMs, 2 + 2 kernels) and its
    # fc (1 GEMM); no TP collective
    from pathlib import Path

    head = Path(__file__).parent / "data" / "draft_heads" / "eagle3-qwen3-8b-shapes"
    dep = Deployment(engine_version="0.21.0", max_model_len=16384, max_num_seqs=256,
                     max_num_batched_tokens=8192, num_speculative_tokens=3,
                     speculative_method="eagle3", speculative_model=str(head))
    e = estimate("qwen3-8b", dep, gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    assert drafter_captures(ctx) == "eagle"
    assert drafter_graph_nodes(ctx) == (2, 5, 4, 0)
    assert drafter_driver_per_size(ctx) == 2 * GRAPH_DRIVER_PER_GRAPH + 5 * 3350 + 4 * 2310


def test_sparse_mla_indexer_splits_the_pieces_from_0111() -> None:
    # config/compilation.py CompilationConfig._attention_ops lists "vllm::sparse_attn_indexer"
    # from 0.11.1 (absent in 0.11.0): a DeepSeek-V3.2 layer is split at its indexer op and its
    # MLA attention, so a rank's 61 layers make 2 × 61 + 1 pieces a PIECEWISE size (0.11.0:
    # 61 + 1); the V3.2 MTP drafter's one layer 3 pieces
    from memprof.core.terms.cudagraph import graph_pieces

    _e, old = _ctx("deepseek-v3.2", "0.11.0")
    assert graph_pieces(old) == 62
    _e, ctx = _ctx("deepseek-v3.2", "0.21.0")
    assert graph_pieces(ctx) == 123
    assert drafter_graph_nodes(ctx)[0] == 3
    # a dense MLA model (DeepSeek-R1) has no indexer op
    _e, r1 = _ctx("deepseek-r1", "0.21.0")
    assert graph_pieces(r1) == 62 and drafter_graph_nodes(r1)[0] == 2
    # the 61 more graphs a PIECEWISE size cost their driver memory each, at every size
    g = cudagraph_model(ctx)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cudagraph, "_indexer_splits", lambda _ctx, mtp: 0)
        g0 = cudagraph_model(ctx)
    n = len(g.modes["PIECEWISE"])
    assert g.actual - g0.actual == n * (61 + 1) * GRAPH_DRIVER_PER_GRAPH
    assert g.graphs - g0.graphs == n * (61 + 1)
