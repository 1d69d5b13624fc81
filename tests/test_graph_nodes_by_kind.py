"""``cudagraph.graph_nodes`` counts each layer kind once, times its layers: the same GEMM and
other nodes as the sum over every layer of the rank (MTP layers left out), for every bundled
model, on pipeline stages with and without the MTP layers and with fp8 block linears."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.gpus import resolve_gpu
from memprof.core.kvcache import rank_layers
from memprof.core.models.load import configs_dir
from memprof.core.terms.cudagraph import (
    attention_nodes,
    graph_nodes,
    linear_extra_nodes,
    mlp_nodes,
    tp_all_reduces,
)
from memprof.core.terms.custom_allreduce import custom_all_reduce_applies

MODELS = sorted(p.stem for p in (configs_dir() / "models").glob("*.json")
                if not p.name.startswith("_"))


def _per_layer(ctx: TermContext, mode: str) -> tuple[int, int]:
    """The sum over each layer of the rank, one by one (what graph_nodes stands for)."""
    gemm = other = 0
    extra = linear_extra_nodes(ctx)
    for layer in rank_layers(ctx.spec, ctx.dep, ctx.coord):
        if layer in ctx.spec.mtp_layers:
            continue
        ag, ao = attention_nodes(ctx, layer, mode, extra)
        mg, mo = mlp_nodes(ctx, layer, extra)
        gemm, other = gemm + ag + mg, other + ao + mo
    if ctx.dep.tp > 1 and custom_all_reduce_applies(ctx.dep, ctx.gpu):
        other += tp_all_reduces(ctx)
    return gemm, other


@pytest.mark.parametrize("model", MODELS)
def test_graph_nodes_by_kind_is_the_per_layer_sum(model: str) -> None:
    gpu = resolve_gpu("H200", None)
    seen = 0
    for dep in (Deployment(tp=2, max_model_len=4096),
                Deployment(pp=2, max_model_len=4096, num_speculative_tokens=1)):
        try:
            e = estimate(model, dep, gpu=gpu)
        except BadInput:  # a layout the model refuses (no MTP layers, ...): nothing to compare
            continue
        for r in e.ranks:
            ctx = rank_context(e, r)
            for mode in ("PIECEWISE", "FULL"):
                assert graph_nodes(ctx, mode) == _per_layer(ctx, mode), (model, dep, r.coord)
                seen += 1
    assert seen > 0, model


def test_an_mtp_stage_is_compared() -> None:
    """The MTP layers of the last stage are among the layers walked (and left out)."""
    e = estimate("deepseek-v3", Deployment(tp=8, pp=2, max_model_len=4096,
                                           num_speculative_tokens=1), gpu=resolve_gpu("H200", None))
    last = next(r for r in e.ranks if r.coord.pp_stage == 1)
    ctx = rank_context(e, last)
    assert any(x in ctx.spec.mtp_layers for x in rank_layers(ctx.spec, ctx.dep, ctx.coord))
    assert graph_nodes(ctx, "FULL") == _per_layer(ctx, "FULL")
