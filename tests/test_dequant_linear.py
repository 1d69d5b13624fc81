"""vLLM's AWQ linear (not Marlin) from 256 tokens and its GPTQ linear on every call: the whole
weight dequantised (``memprof.core.terms.dequant_linear``), in the profile run's live sets and in
the graphs' pool; row 2465's graph figure."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.terms.activation import activation_stages
from memprof.core.terms.cudagraph import cudagraph_model
from memprof.core.terms.dequant_linear import (
    AWQ_DENSE_MATMUL,
    GPTQ_GEMM_TEMP,
    dequant_linears,
    dequant_stage,
)
from memprof.core.version_diff import all_rules
from memprof.core.versions import value_at

ROOT = Path(__file__).resolve().parent.parent
NAME = "AWQ dequantised linear"


def _ctx(quant: str | None = "awq", gpu: str = "RTX-A5000", version: str = "0.13.0"):
    dep = Deployment(engine_version=version, quantization=quant, dtype="float16",
                     max_model_len=8192)
    e = estimate("deepseek-r1-distill-qwen-14b", dep, gpu_name=gpu)
    return e, rank_context(e, e.ranks[0])


def test_the_rule_reads_256_tokens_and_is_in_the_rulebook() -> None:
    assert all(r in all_rules() and r.source.strip() for r in AWQ_DENSE_MATMUL)
    assert value_at(AWQ_DENSE_MATMUL, "0.13.0", None) == 256
    assert value_at(AWQ_DENSE_MATMUL, "0.6.4", None) is None


def test_the_linears_of_qwen2_5_14b_by_hand() -> None:
    # 48 layers of hidden 5120, 40 heads and 8 KV heads of 128, intermediate 13824 (TP1):
    # qkv [5120, 5120 + 2 × 1024], o [5120, 5120], gate_up [5120, 2 × 13824], down [13824, 5120]
    _e, ctx = _ctx()
    got = {m.rsplit(".", 1)[-1]: (i, o, b) for m, i, o, b in dequant_linears(ctx)}
    assert got == {"qkv_proj": (5120, 7168, 2), "o_proj": (5120, 5120, 2),
                   "gate_up_proj": (5120, 27648, 2), "down_proj": (13824, 5120, 2)}


def test_the_stage_from_256_tokens_only() -> None:
    _e, ctx = _ctx()
    assert dequant_stage(ctx, 255, []) is None
    st = dequant_stage(ctx, 256, [])
    assert st is not None and st.name == NAME
    # gate_up holds the most: its fp16 copy and the matmul's [T, 27648] fp16 output
    assert dict(st.parts) == {"dequantised gate_up_proj [5120,27648]": 5120 * 27648 * 2,
                              "matmul out [T,27648]": 256 * 27648 * 2}
    assert NAME in {s.name for s in activation_stages(ctx, tokens=512, rows=0, decode=True)}
    assert NAME not in {s.name for s in activation_stages(ctx, tokens=255, rows=0,
                                                          decode=True)}


def test_marlin_and_unquantised_ranks_have_none() -> None:
    _e, ctx = _ctx(quant=None)
    assert dequant_linears(ctx) == []
    # an AWQ checkpoint (its config declares it) with no flag runs awq_marlin on sm80+ and
    # vLLM's AWQ below; with --quantization awq, vLLM's AWQ everywhere ("forcing awq")
    def checkpoint(c, source="config"):  # type: ignore[no-untyped-def]
        assert c.quant is not None
        return dataclasses.replace(c, quant=dataclasses.replace(c.quant, source=source))

    _e, ctx = _ctx()
    assert dequant_linears(checkpoint(ctx)) == []
    assert dequant_linears(checkpoint(ctx, "forced"))
    _e, t4 = _ctx(gpu="T4")
    assert dequant_linears(checkpoint(t4))


def test_an_explicit_awq_flag_forces_an_awq_checkpoint_off_marlin() -> None:
    # quant_from_flag: "forcing awq" (AWQMarlinConfig.override_quantization_method)
    from memprof.core.models.quant_config import quant_from_flag
    from memprof.core.models.spec import ModelSpec, QuantConfig

    _e, ctx = _ctx(quant=None)
    spec: ModelSpec = dataclasses.replace(ctx.spec, quant=QuantConfig(
        method="awq", group_size=128, bits=4, zero_point=True))
    forced = quant_from_flag("awq", spec, "0.13.0")
    assert forced is not None and forced.source == "forced"
    kept = quant_from_flag("awq_marlin", spec, "0.13.0")
    assert kept is not None and kept.source == "config"


def test_an_explicit_awq_or_gptq_flag_runs_marlin_once_one_config_serves_every_spelling() -> None:
    # vLLM 0.24.0's get_quantization_config maps awq, awq_marlin and auto_awq to AutoAWQConfig,
    # which takes awq as the user's valid choice and runs Marlin (0.28.0's log of published row
    # 1728: 'quantization': 'awq', AutoAWQMarlinLinearMethod); 0.22.0 did so for gptq
    from memprof.core.models.quant_config import plain_name_forced, quant_from_flag
    from memprof.core.models.spec import ModelSpec, QuantConfig

    _e, ctx = _ctx(quant=None)
    awq: ModelSpec = dataclasses.replace(ctx.spec, quant=QuantConfig(
        method="awq", group_size=128, bits=4, zero_point=True))
    assert [plain_name_forced("awq", v) for v in ("0.23.0", "0.24.0", "0.28.0")] == [
        True, False, False]
    assert [plain_name_forced("gptq", v) for v in ("0.21.0", "0.22.0")] == [True, False]
    assert plain_name_forced("awq", "0.28.0", by_release=False)
    assert not plain_name_forced("awq_marlin", "0.13.0")
    kept = quant_from_flag("awq", awq, "0.24.0")
    assert kept is not None and kept.source == "config"
    bare = ctx.spec if ctx.spec.quant is None else dataclasses.replace(ctx.spec, quant=None)
    before, after = (quant_from_flag(f, bare, v) for f, v in (("awq", "0.23.0"),
                                                               ("awq", "0.28.0")))
    assert before is not None and after is not None
    assert (before.marlin, after.marlin) == (False, True)
    assert after == quant_from_flag("awq_marlin", bare, "0.28.0")
    gptq = quant_from_flag("gptq", bare, "0.22.0")
    assert gptq is not None and gptq.marlin


def test_the_graph_pool_holds_the_copy() -> None:
    # the largest capture size (512 here) dequantises: the pool grows by the copy and its output
    # beyond the bf16-sized live sets; below 256 tokens nothing changes
    _e, ctx = _ctx()
    g = cudagraph_model(ctx)
    assert max(max(v) for v in g.modes.values()) >= 256
    assert g.actual - g.driver > 5120 * 27648 * 2
    # the same graphs of a bf16 model hold no copy: the pool is smaller by more than it
    _e, bf16 = _ctx(quant=None)
    g16 = cudagraph_model(bf16)
    assert (g.actual - g.driver) - (g16.actual - g16.driver) > 5120 * 27648 * 2 // 2


def test_row_2465_graph_figure() -> None:
    rows = json.loads((ROOT / "tests/data/published.json").read_text())["rows"]
    (row,) = [r for r in rows if r["id"] == 2465]
    assert row["memprof_run"]["quantization"] == "awq"
    assert "forcing awq" in row["quote"]
    _e, ctx = _ctx()
    logged = row["observed"]["graph_gib"]
    got = cudagraph_model(ctx).actual / 2**30
    # 0.707 GiB without the copy, against the log's 1.18; with it within 25%
    assert abs(got / logged - 1) < 0.25


def test_awq_marlin_has_none() -> None:
    _e, ctx = _ctx(quant="awq_marlin", gpu="A100-80GB")
    assert dequant_linears(ctx) == []


def test_gptq_holds_its_temp_dq_at_every_size() -> None:
    # gptq_gemm's temp_dq [in, out] fp16 on every call (q_gemm.cu): Llama-3.1-8B under
    # --quantization gptq on a T4 (sm75: no gptq_marlin) at 0.13.0
    assert value_at(GPTQ_GEMM_TEMP, "0.13.0", None) == 1
    assert value_at(GPTQ_GEMM_TEMP, "0.27.1", None) is None
    assert all(r in all_rules() for r in GPTQ_GEMM_TEMP)
    dep = Deployment(engine_version="0.13.0", quantization="gptq", dtype="float16",
                     max_model_len=8192)
    e = estimate("llama-3.1-8b", dep, gpu_name="T4")
    ctx = rank_context(e, e.ranks[0])
    st = dequant_stage(ctx, 1, [])
    assert st is not None and st.name == "GPTQ dequantised linear"
    assert dict(st.parts) == {"dequantised gate_up_proj [4096,28672]": 4096 * 28672 * 2,
                              "matmul out [T,28672]": 28672 * 2}
    # gptq_marlin on sm80+ makes none; on sm75 it is not available (min capability 8.0)
    marlin = estimate("llama-3.1-8b", dataclasses.replace(dep, quantization="gptq_marlin"),
                      gpu_name="A100-80GB")
    assert dequant_linears(rank_context(marlin, marlin.ranks[0])) == []


# --- per card: Marlin's smallest compute capability, by release -----------------------------
# 0.13.0 quantization/utils/marlin_utils.py query_marlin_supported_quant_types returns no type
# below 80 (awq_marlin.py / gptq_marlin.py get_min_capability 80); 0.14.0 - 0.24.0 below 75
# (get_min_capability 75). From 0.24.0 --quantization awq is AutoAWQConfig, whose
# get_quant_method runs Marlin where check_marlin_supported holds and AutoAWQLinearMethod where
# it fails, and whose get_min_capability is 75 (a V100 is refused before any kernel is chosen).


def test_marlins_smallest_capability_by_release() -> None:
    from memprof.core.capability import MARLIN_MIN_CC, marlin_min_cc

    assert all(r in all_rules() and r.source.strip() for r in MARLIN_MIN_CC)
    assert [marlin_min_cc(v) for v in ("0.11.0", "0.13.0", "0.14.0", "0.24.0", None)] == [
        80, 80, 75, 75, 75]
    assert marlin_min_cc("0.5.4", engine="sglang") == 80  # SGLang's releases are not read here


def _awq_ctx(gpu: str, version: str, source: str | None = None):  # type: ignore[no-untyped-def]
    """The 14B under --quantization awq (a flag on the bf16 config), or as an AWQ checkpoint
    (``source`` "config": the checkpoint's own declaration, no flag)."""
    _e, ctx = _ctx(gpu=gpu, version=version)
    if source is not None:
        assert ctx.quant is not None
        ctx = dataclasses.replace(ctx, quant=dataclasses.replace(ctx.quant, source=source,
                                                                 marlin=True))
    return ctx


def test_awq_from_0_24_0_runs_marlin_on_a_t4_and_an_a10() -> None:
    for gpu in ("T4", "A10"):  # sm75, sm86: check_marlin_supported holds
        assert dequant_linears(_awq_ctx(gpu, "0.24.0")) == [], gpu
        assert dequant_linears(_awq_ctx(gpu, "0.24.0", "config")) == [], gpu


def test_an_awq_checkpoint_on_a_t4_is_plain_before_0_14_0_and_marlin_from_it() -> None:
    assert dequant_linears(_awq_ctx("T4", "0.13.0", "config"))  # no Marlin below 8.0 there
    assert dequant_linears(_awq_ctx("T4", "0.14.0", "config")) == []
    assert dequant_linears(_awq_ctx("A10", "0.13.0", "config")) == []


def test_awq_on_marlins_terms_below_its_capability_is_the_plain_kernel() -> None:
    # a flag that AutoAWQConfig serves, on a card where check_marlin_supported fails (a T4 at
    # a release whose Marlin starts at 8.0): the AWQ linear, as get_quant_method falls back
    ctx = _awq_ctx("T4", "0.13.0", "flag")
    assert ctx.quant is not None and ctx.quant.marlin
    assert dequant_linears(ctx)


def test_awq_on_a_v100_from_0_24_0_is_refused() -> None:
    import pytest

    from memprof.base.errors import BadInput

    dep = Deployment(engine_version="0.24.0", quantization="awq", dtype="float16",
                     max_model_len=8192)
    with pytest.raises(BadInput, match=r"compute capability 7\.5"):
        estimate("deepseek-r1-distill-qwen-14b", dep, gpu_name="V100-32GB")


def test_the_gptq_twin_from_0_22_0_per_card() -> None:
    # AutoGPTQConfig (0.22.0): kernels/linear choose_mp_linear_kernel takes MarlinLinearKernel
    # from 7.5 and ExllamaLinearKernel (6.0) below it
    from memprof.core.terms.dequant_linear import _plain_gptq

    def plain(gpu: str, version: str = "0.22.0") -> bool:
        dep = Deployment(engine_version=version, quantization="gptq", dtype="float16",
                         max_model_len=8192)
        e = estimate("llama-3.1-8b", dep, gpu_name=gpu)
        return _plain_gptq(rank_context(e, e.ranks[0]))

    assert [plain(g) for g in ("V100-32GB", "T4", "A10")] == [True, False, False]
    assert plain("T4", "0.13.0")  # gptq_marlin from 8.0 there (and the flag forces gptq)
