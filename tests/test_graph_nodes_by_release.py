"""The kernel-node counts ``cudagraph`` reads per vLLM release, each against the source it cites:
the fp8 block linear's SM90 pad from 0.10.2 (``FP8_BLOCK_PAD_SM90``), the router logits' fp32
cast up to 0.11.0 (``MOE_ROUTER_CAST``), a renormalising router's sum and division up to 0.11.0
(``MOE_RENORMALIZE``), and the expert-map index kernel under expert
parallelism (``MOE_EP_EXPERT_MAP``)."""

from __future__ import annotations

import pytest

from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.gpus import resolve_gpu
from memprof.core.terms.cudagraph import (
    FP8_BLOCK_PAD_NODES_SM90,
    FP8_BLOCK_QUANT_NODES,
    linear_extra_nodes,
    moe_nodes,
)
from memprof.core.versions import value_at


def _ctx(model: str, gpu: str, **dep: object) -> TermContext:
    e = estimate(model, Deployment(max_model_len=4096, **dep),  # type: ignore[arg-type]
                 gpu=resolve_gpu(gpu, None))
    return rank_context(e, e.ranks[0])


def _moe(ctx: TermContext) -> tuple[int, int]:
    layer = next(x for x in ctx.spec.layers if x.mlp.kind == "moe")
    return moe_nodes(ctx, layer.mlp)


@pytest.mark.parametrize(("version", "gpu", "extra"), [
    ("0.8.4", "H100", FP8_BLOCK_QUANT_NODES),  # fp8_utils.py: quantise, GEMM
    ("0.10.0", "H100", FP8_BLOCK_QUANT_NODES),
    ("0.10.1.1", "H100", FP8_BLOCK_QUANT_NODES),
    ("0.10.2", "H100", FP8_BLOCK_QUANT_NODES + FP8_BLOCK_PAD_NODES_SM90),  # F.pad on SM90
    ("0.11.0", "H100", FP8_BLOCK_QUANT_NODES + FP8_BLOCK_PAD_NODES_SM90),
    ("0.10.2", "L40S", FP8_BLOCK_QUANT_NODES),  # capability 8.9: no pad in any release
])
def test_fp8_block_pad_on_sm90_from_0_10_2(version: str, gpu: str, extra: int) -> None:
    assert linear_extra_nodes(_ctx("qwen3-235b-a22b-fp8", gpu, tp=4,
                                   engine_version=version)) == extra


def test_an_engine_whose_releases_are_not_read_keeps_the_newest_pad() -> None:
    ctx = _ctx("qwen3-235b-a22b-fp8", "H100", tp=4, engine="sglang")
    assert linear_extra_nodes(ctx) == FP8_BLOCK_QUANT_NODES + FP8_BLOCK_PAD_NODES_SM90


def test_router_cast_and_renormalisation_up_to_0_11_0() -> None:
    # softmax routing (Qwen3-MoE, norm_topk_prob true): the fp32 cast of the logits is one
    # kernel more before 0.11.1, and the top-k weights' sum and division two more
    old = _moe(_ctx("qwen3-235b-a22b", "H100", tp=8, engine_version="0.11.0"))
    new = _moe(_ctx("qwen3-235b-a22b", "H100", tp=8, engine_version="0.11.1"))
    assert old[0] == new[0] and old[1] == new[1] + 1 + 2


def test_renormalisation_only_where_the_router_renormalises() -> None:
    # the same layer with norm_topk_prob false (Qwen2-MoE's default, the checkpoint's
    # config.json read as given) keeps only the cast at 0.11.0
    from dataclasses import replace

    ctx = _ctx("qwen3-235b-a22b", "H100", tp=8, engine_version="0.11.0")
    mlp = next(x for x in ctx.spec.layers if x.mlp.kind == "moe").mlp
    assert mlp.renormalize  # the bundled config's norm_topk_prob: true
    plain = moe_nodes(ctx, replace(mlp, renormalize=False))
    assert moe_nodes(ctx, mlp) == (plain[0], plain[1] + 2)
    new = _ctx("qwen3-235b-a22b", "H100", tp=8, engine_version="0.11.1")
    assert moe_nodes(new, mlp) == moe_nodes(new, replace(mlp, renormalize=False))


def test_router_cast_not_on_the_noaux_path() -> None:
    # DeepSeek's grouped top-k (fused_grouped_topk) is not fused_topk: no change at 0.11.1
    old = _moe(_ctx("deepseek-v3", "H200", tp=8, engine_version="0.11.0"))
    new = _moe(_ctx("deepseek-v3", "H200", tp=8, engine_version="0.11.1"))
    assert old == new


@pytest.mark.parametrize("version", ["0.8.4", "0.10.0", "0.11.0", "0.33.0"])
def test_expert_map_index_under_expert_parallelism(version: str) -> None:
    ep = _moe(_ctx("qwen3-235b-a22b", "H100", tp=8, engine_version=version,
                   enable_expert_parallel=True))
    no_ep = _moe(_ctx("qwen3-235b-a22b", "H100", tp=8, engine_version=version))
    assert ep[0] == no_ep[0] and ep[1] == no_ep[1] + 1


def test_rules_hold_where_their_sources_say() -> None:
    from memprof.core.terms.cudagraph import (
        FP8_BLOCK_PAD_SM90,
        MOE_RENORMALIZE,
        MOE_ROUTER_CAST,
    )

    assert value_at(FP8_BLOCK_PAD_SM90, "0.10.1.1") == 0
    assert value_at(FP8_BLOCK_PAD_SM90, "0.10.2") == FP8_BLOCK_PAD_NODES_SM90
    assert value_at(MOE_ROUTER_CAST, "0.11.0") == 1
    assert value_at(MOE_ROUTER_CAST, "0.11.1") == 0
    assert value_at(MOE_RENORMALIZE, "0.8.4") == value_at(MOE_RENORMALIZE, "0.11.0") == 2
    assert value_at(MOE_RENORMALIZE, "0.11.1") == 0
    assert value_at(MOE_RENORMALIZE, "0.10.2", 0, engine="sglang") == 0  # vLLM's code only


def test_marlin_mxfp4_workspace_fill_on_sm90_before_0_12_0() -> None:
    # gpt-oss on H100: MXFP4 experts on Marlin up to 0.11.2, whose apply makes the workspace
    # (a torch.zeros fill) on every call; from 0.12.0 the Triton kernels, no fill
    from memprof.core.terms.cudagraph import MXFP4_MARLIN_WORKSPACE_FILL

    marlin = _moe(_ctx("gpt-oss-120b", "H100", engine_version="0.11.2"))
    triton = _moe(_ctx("gpt-oss-120b", "H100", engine_version="0.12.0"))
    assert marlin == (triton[0], triton[1] + MXFP4_MARLIN_WORKSPACE_FILL)
    # not on an engine whose releases are not read
    assert _moe(_ctx("gpt-oss-120b", "H100", engine="sglang")) == triton


@pytest.mark.parametrize(("model", "gpu"), [
    ("mixtral-8x7b", "H100"),  # mixtral.py FusedMoE(renormalize=True)
    ("qwen3-next-80b-a3b-instruct", "H100"),  # norm_topk_prob true in its config.json
    ("gpt-oss-20b", "A100-80GB"),  # gpt_oss.py FusedMoE(renormalize=True)
])
def test_renormalising_routers_of_other_families(model: str, gpu: str) -> None:
    # the same two kernels at 0.11.0, none at 0.11.1 (with the router cast: three in all)
    ctx = _ctx(model, gpu, engine_version="0.11.0")
    mlp = next(x for x in ctx.spec.layers if x.mlp.kind == "moe").mlp
    assert mlp.renormalize
    old = moe_nodes(ctx, mlp)
    new = moe_nodes(_ctx(model, gpu, engine_version="0.11.1"), mlp)
    assert old == (new[0], new[1] + 1 + 2)
