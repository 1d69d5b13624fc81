"""``cudagraph_model`` reads each mode's live sets and per-size driver bytes once: its figures
equal those the public pieces give mode by mode (``graph_pool_tensor_bytes`` of all modes and of
each mode's largest size, ``graph_driver_bytes`` of n sizes = n × of one size,
``graph_driver_first`` once, FlashInfer's workspace in the FULL mode's first sample), and
``graph_pieces`` counts the rank's layers that are not MTP layers one by one, plus one, over the
bundled models and layouts."""

from __future__ import annotations

import itertools

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.gpus import resolve_gpu
from memprof.core.kvcache import rank_layers
from memprof.core.models.load import bundled_models
from memprof.core.terms.attn_capture import estimate_window_workspace
from memprof.core.terms.cudagraph import (
    CUDAGRAPH_MIN_PER_GRAPH,
    GRAPH_DRIVER_NCCL_MIXING,
    GRAPH_DRIVER_PER_GRAPH,
    GRAPH_DRIVER_PER_NCCL_NODE,
    cudagraph_model,
    graph_driver_bytes,
    graph_driver_first,
    graph_nccl_nodes,
    graph_nodes,
    graph_pieces,
    graph_pool_tensor_bytes,
    nccl_mixing_nodes,
    node_costs,
    tp_all_reduces,
)
from memprof.core.versions import version_key

DEPLOYMENTS = [
    Deployment(),
    Deployment(tp=2, pp=2, kv_cache_dtype="fp8"),
    Deployment(tp=8, num_speculative_tokens=1),
    Deployment(engine_version="0.10.1", tp=2),  # PIECEWISE only
    Deployment(engine_version="0.7.2"),  # V0: FULL graphs only
]


def test_model_equals_its_pieces_mode_by_mode() -> None:
    ranks = both_modes = mtp = 0
    for model, dep, gpu in itertools.product(sorted(bundled_models()), DEPLOYMENTS,
                                             ("H200", "A100-80GB")):
        try:
            e = estimate(model, dep, gpu=resolve_gpu(gpu, None))
        except BadInput:
            continue  # a layout the model refuses
        for r in e.ranks:
            ctx = rank_context(e, r)
            g = cudagraph_model(ctx)
            if not g.modes:
                continue
            ranks += 1
            both_modes += len(g.modes) == 2
            first = graph_driver_first(ctx)
            assert g.actual == graph_pool_tensor_bytes(ctx, g.modes) + first + sum(
                graph_driver_bytes(ctx, m, len(v)) for m, v in g.modes.items())
            assert g.driver == g.actual - graph_pool_tensor_bytes(ctx, g.modes)
            for i, (m, v) in enumerate(g.modes.items()):
                one = graph_driver_bytes(ctx, m, 1)
                # the formula as graph_driver_bytes states it, term by term
                graphs = len(v) * (graph_pieces(ctx) if m == "PIECEWISE" else 1)
                gemm, other = graph_nodes(ctx, m)
                per_gemm, per_other = node_costs(ctx)
                nccl = (graph_nccl_nodes(ctx) * GRAPH_DRIVER_PER_NCCL_NODE
                        + nccl_mixing_nodes(ctx, m) * GRAPH_DRIVER_NCCL_MIXING)
                assert graph_driver_bytes(ctx, m, len(v)) == (
                    graphs * GRAPH_DRIVER_PER_GRAPH
                    + len(v) * (gemm * per_gemm + other * per_other + nccl))
                # FlashInfer's workspace: in the FULL mode's first sample (terms/attn_capture.py)
                ws = estimate_window_workspace(ctx)[0] if m == "FULL" else 0
                assert g.first_capture[m] == (graph_pool_tensor_bytes(ctx, {m: [max(v)]}) + one
                                              + (first if i == 0 else 0) + ws)
                assert g.per_graph_sample[m] == max(one, CUDAGRAPH_MIN_PER_GRAPH)
            mtp += any(x in ctx.spec.mtp_layers
                       for x in rank_layers(ctx.spec, ctx.dep, ctx.coord))
            layers = [x for x in rank_layers(ctx.spec, ctx.dep, ctx.coord)
                      if x not in ctx.spec.mtp_layers]
            # from 0.11.1 "vllm::sparse_attn_indexer" is a splitting op too
            # (CompilationConfig._attention_ops): a DeepSeek-V3.2 layer makes two pieces
            indexer = sum(1 for x in layers if x.attention.kind == "mla"
                          and x.attention.has_indexer) if version_key(
                ctx.dep.engine_version or "0.33.0") >= version_key("0.11.1") else 0
            assert graph_pieces(ctx) == len(layers) + 1 + indexer
            if ctx.dep.tp > 1:
                assert tp_all_reduces(ctx) == 2 * len(layers) + (ctx.coord.pp_stage == 0)
    assert ranks > 50 and both_modes > 10 and mtp > 0
