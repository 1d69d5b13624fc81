"""Scratch catalog and terms (memprof/core/scratch.py): hand calculations, written out here."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memprof.base.errors import BadInput
from memprof.base.units import KiB, MiB
from memprof.core.components import Component, TermContext, TermFn
from memprof.core.deployment import Deployment, ranks
from memprof.core.engine_defaults import resolve
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.kvcache import kv_plan
from memprof.core.models import ModelSpec, load_model
from memprof.core.scratch import (
    BACKENDS,
    CATALOG,
    default_backend,
    default_scratch_policy,
    scratch_budget_terms,
    scratch_runtime_terms,
    scratch_savings,
    scratch_terms,
)
from memprof.core.scratch.buffer import LIFETIMES, SGLANG_DP_ATTENTION
from memprof.core.weights import model_dtype


@cache
def _spec(model: str, mtp: bool = False) -> ModelSpec:
    return load_model(model, speculative_mtp=mtp)


def _ctx(model: str, gpu_name: str, *, rank: int = 0, blocks: int = 0,
         **dep_kwargs: Any) -> TermContext:
    """A TermContext built the way memprof.core.estimate builds one."""
    spec = _spec(model, bool(dep_kwargs.get("num_speculative_tokens")))
    gpu = find_gpu(gpu_name)
    dep = resolve(Deployment(**dep_kwargs), spec, gpu)
    dtype = model_dtype(spec, dep)
    coord = ranks(dep)[rank]
    plan = kv_plan(spec, dep, coord, dtype, gpu.arch)
    return TermContext(spec=spec, dep=dep, gpu=gpu, coord=coord, plan=plan, weights_bytes=0,
                       model_dtype=dtype, num_gpu_blocks=blocks)


def _by_name(comps: list[Component]) -> dict[str, Component]:
    names = [c.name for c in comps]
    assert len(names) == len(set(names)), names
    return {c.name: c for c in comps}


def _savings(ctx: TermContext) -> dict[str, tuple[int, int]]:
    return {name: (per, shared) for name, per, shared in scratch_savings(ctx)}


# --- the catalog ---------------------------------------------------------------------------------


def test_catalog_is_well_formed() -> None:
    variants: dict[str, set[str]] = {}
    for b in CATALOG:
        assert b.lifetime in LIFETIMES
        assert b.policy in ("per-layer", "shared", "both")
        assert b.source and ("#" in b.source or ".py" in b.source), b.name
        assert b.where == ("budget" if b.profiled else "runtime")
        variants.setdefault(b.key, set()).add(b.policy)
        # registered buffers are model load; lazy and KV-sized ones the profiler cannot see
        if b.lifetime == "per_layer_registered":
            assert b.profiled and b.per_layer
        if b.lifetime == "per_layer_lazy" or b.needs_kv_blocks:
            assert not b.profiled
    for key, policies in variants.items():
        assert policies in ({"per-layer", "shared"}, {"both"}), key
    assert {b.backend for b in CATALOG} >= {"cutlass_mla", "flashinfer_mla", "turboquant",
                                             "aiter_mla", "flashinfer", SGLANG_DP_ATTENTION}


def test_every_current_release_shares() -> None:
    for key in (*BACKENDS, SGLANG_DP_ATTENTION):
        assert default_scratch_policy(key) == "shared"


# --- TurboQuant: Qwen3-32B, turboquant_k8v4, one H200, max_num_seqs 256 (seed 001) -------------

TQ: dict[str, Any] = {"kv_cache_dtype": "turboquant_k8v4", "max_num_seqs": 256}
# B = 256 sequences, Hq = 64 heads, S = 32 splits, D = 128
TQ_MID_O = 4 * 256 * 64 * 32 * 129  # fp32 (B, Hq, S, D+1)
TQ_OUT_FP32 = 4 * 256 * 64 * 128  # fp32 (B, Hq, D), per-layer and #40655 shared alike
TQ_LSE = 4 * 256 * 64  # fp32 (B, Hq)


def test_tq_hand_calculation() -> None:
    assert TQ_MID_O == 270_532_608
    assert TQ_OUT_FP32 == 8_388_608
    assert TQ_LSE == 65_536
    assert TQ_MID_O + TQ_OUT_FP32 + TQ_LSE == 278_986_752


def test_tq_per_layer_is_model_load() -> None:
    ctx = _ctx("qwen3-32b", "H200", scratch="per-layer", **TQ)
    assert ctx.dep.max_num_seqs == 256 and ctx.dep.tp == 1
    budget = _by_name(scratch_budget_terms(ctx))
    c = budget["TurboQuant decode mid_o+output+lse (per layer)"]
    # 64 layers; the first 2 and last 2 are boundary layers in bf16 without the buffers
    assert (c.count, c.bytes_each) == (60, 278_986_752)
    assert c.bytes == 60 * 278_986_752 == 16_739_205_120
    assert c.category == "scratch" and c.where == "budget" and c.profiled
    assert "256×64×32×129" in c.formula and "#38479" in c.formula
    # the lazily grown per-layer continuation-prefill dequant buffers are runtime
    runtime = _by_name(scratch_runtime_terms(ctx))
    dq = runtime["TurboQuant continuation-prefill K/V dequant (per layer)"]
    # k and v of (1, Hk=8, alloc_len, 128) fp16; alloc_len = ceil(40959 / 16) · 16 = 40960
    assert dq.bytes_each == 2 * (1 * 8 * 40960 * 128 * 2) == 167_772_160
    assert dq.count == 60 and not dq.profiled and dq.where == "runtime"
    assert set(budget).isdisjoint(runtime)


def test_tq_shared_is_one_workspace_set() -> None:
    ctx = _ctx("qwen3-32b", "H200", scratch="shared", **TQ)
    comps = _by_name(scratch_terms(ctx))
    c = comps["TurboQuant decode mid_o+output+lse (shared)"]
    # one WorkspaceManager set of #40655's three fp32 buffers, each part rounded up to 256 B
    # (all three are multiples of 256 already here, so the alignment adds nothing)
    shared = TQ_MID_O + TQ_OUT_FP32 + TQ_LSE
    assert shared == 278_986_752
    assert (c.count, c.bytes) == (1, shared)
    assert c.where == "runtime" and not c.profiled
    # the dequant set (160 MiB) shares the same WorkspaceManager buffer: it adds nothing
    dq = comps["TurboQuant continuation-prefill K/V dequant (shared)"]
    assert dq.bytes == 0 and "fits in the WorkspaceManager buffer" in dq.formula
    assert scratch_budget_terms(ctx) == []
    assert _savings(ctx)["TurboQuant decode mid_o+output+lse"] == (60 * 278_986_752, shared)
    assert _savings(ctx)["TurboQuant continuation-prefill K/V dequant"] == (
        60 * 167_772_160, 167_772_160)


def test_tq_default_policy_is_shared() -> None:
    ctx = _ctx("qwen3-32b", "H200", **TQ)
    assert ctx.dep.scratch is None
    names = {c.name for c in scratch_terms(ctx)}
    assert "TurboQuant decode mid_o+output+lse (shared)" in names
    assert not any("per layer" in n for n in names)


def test_tq_workspace_rounds_each_part_to_256_bytes() -> None:
    # Qwen3-0.6B: 16 heads, 28 layers; 3 sequences: lse = 4·3·16 = 192 B -> 256 B
    # max_model_len 64 keeps the continuation-prefill set (2·8·64·128·2 = 262,144 B) below the
    # decode set, so the decode set sizes the WorkspaceManager buffer
    ctx = _ctx("qwen3-0.6b", "H200", kv_cache_dtype="turboquant_4bit_nc", max_num_seqs=3,
               max_model_len=64, scratch="shared")
    mid_o = 4 * 3 * 16 * 32 * 129  # 792,576 = 3,096 × 256
    out = 4 * 3 * 16 * 128  # 24,576 (fp32, as #40655 shares it)
    comps = _by_name(scratch_terms(ctx))
    c = comps["TurboQuant decode mid_o+output+lse (shared)"]
    assert c.bytes == mid_o + out + 256 == 817_408
    assert comps["TurboQuant continuation-prefill K/V dequant (shared)"].bytes == 0
    per = _by_name(scratch_terms(replace(ctx, dep=ctx.dep.with_(scratch="per-layer"))))
    p = per["TurboQuant decode mid_o+output+lse (per layer)"]
    assert (p.count, p.bytes_each) == (28 - 4, 4 * 3 * 16 * (32 * 129 + 128 + 1))


def test_tq_counts_only_the_layers_of_the_pp_stage() -> None:
    # 64 layers over PP=3: 21 / 22 / 21 (vLLM get_pp_indices); boundary layers 0, 1, 62, 63
    counts = []
    for rank in range(3):
        ctx = _ctx("qwen3-32b", "H200", pp=3, rank=rank, scratch="per-layer", **TQ)
        c = _by_name(scratch_budget_terms(ctx))["TurboQuant decode mid_o+output+lse (per layer)"]
        counts.append(c.count)
    assert counts == [21 - 2, 22, 21 - 2]


def test_tq_tp_splits_the_heads() -> None:
    ctx = _ctx("qwen3-32b", "H200", tp=4, scratch="per-layer", **TQ)
    c = _by_name(scratch_budget_terms(ctx))["TurboQuant decode mid_o+output+lse (per layer)"]
    assert c.bytes_each == 278_986_752 // 4  # Hq = 64 / 4 = 16


def test_tq_per_layer_buffers_shrink_the_kv_budget() -> None:
    dep = Deployment(**TQ)
    terms: tuple[list[TermFn], list[TermFn]] = ([scratch_budget_terms], [scratch_runtime_terms])
    per = estimate("qwen3-32b", dep.with_(scratch="per-layer"), gpu_name="H200", terms=terms)
    shared = estimate("qwen3-32b", dep.with_(scratch="shared"), gpu_name="H200", terms=terms)
    lost = shared.ranks[0].available_kv_bytes - per.ranks[0].available_kv_bytes
    assert lost == 60 * 278_986_752


# --- CUTLASS MLA / FlashInfer MLA decode output (seed 000) ----------------------------------------

R1: dict[str, Any] = {"tp": 8, "attention_backend": "cutlass_mla", "max_num_seqs": 2048}


def test_cutlass_mla_per_layer_decode_out() -> None:
    ctx = _ctx("deepseek-r1", "B200", scratch="per-layer", **R1)
    assert ctx.dep.max_num_batched_tokens is not None and ctx.dep.max_num_batched_tokens >= 2048
    runtime = _by_name(scratch_runtime_terms(ctx))
    c = runtime["CUTLASS MLA decode output (per layer)"]
    # (B_q = 2048, 128 padded heads, 512 latent) bf16 per MLA layer, 61 layers
    assert c.bytes_each == 2048 * 128 * 512 * 2 == 268_435_456
    assert c.count == 61 and c.bytes == 61 * 268_435_456 == 16_374_562_816
    assert not c.profiled and c.where == "runtime"
    assert "#37442" in c.formula
    budget = _by_name(scratch_budget_terms(ctx))
    ws = budget["CUTLASS MLA SM100 workspace (workspace)"]
    assert ws.bytes == 128 * MiB and ws.profiled
    assert _savings(ctx)["CUTLASS MLA decode output"] == (61 * 268_435_456, 268_435_456)


def test_cutlass_mla_default_is_shared_and_heads_are_padded() -> None:
    ctx = _ctx("deepseek-r1", "B200", **R1)
    c = _by_name(scratch_runtime_terms(ctx))["CUTLASS MLA decode output (shared)"]
    assert (c.count, c.bytes) == (1, 268_435_456)
    # padded to 128 heads whatever the TP: TP2 gives the same bytes per layer
    tp2 = _ctx("deepseek-r1", "B200", scratch="per-layer", **{**R1, "tp": 2})
    c2 = _by_name(scratch_runtime_terms(tp2))["CUTLASS MLA decode output (per layer)"]
    assert c2.bytes_each == 268_435_456


def test_cutlass_mla_mtp_layer_is_counted_on_the_last_stage() -> None:
    ctx = _ctx("deepseek-r1", "B200", scratch="per-layer", num_speculative_tokens=1, **R1)
    c = _by_name(scratch_runtime_terms(ctx))["CUTLASS MLA decode output (per layer)"]
    # 61 + 1 MTP layer; decode rows B_q = 2048 sequences × (1 + 1) tokens
    assert c.count == 62 and c.bytes_each == 4096 * 128 * 512 * 2


def test_flashinfer_mla_uses_local_heads_and_kv_lora_rank() -> None:
    ctx = _ctx("deepseek-r1", "B200", tp=8, attention_backend="flashinfer_mla",
               max_num_seqs=256, kv_cache_dtype="fp8", scratch="per-layer")
    c = _by_name(scratch_runtime_terms(ctx))["FlashInfer MLA decode output (per layer)"]
    # (B = 256, 128 / 8 = 16 local heads, kv_lora_rank 512), bf16 since the KV cache is fp8
    assert (c.count, c.bytes_each) == (61, 256 * 16 * 512 * 2)
    # with speculative tokens (q_len > 1) FlashInfer MLA allocates no decode output
    spec = _ctx("deepseek-r1", "B200", tp=8, attention_backend="flashinfer_mla",
                max_num_seqs=256, scratch="per-layer", num_speculative_tokens=1)
    assert not any("decode output" in c.name for c in scratch_terms(spec))


# --- SGLang DP-attention gathered buffer (seed 002) ---------------------------------------------

SGL: dict[str, Any] = {"engine": "sglang", "tp": 8, "dp": 8, "enable_dp_attention": True}


def test_sglang_gathered_buffer() -> None:
    ctx = _ctx("deepseek-r1", "H200", cuda_graph_max_bs=128, **SGL)
    (c,) = scratch_terms(ctx)
    # (max_bs 128 × 1 token per request × dp 8 rows, hidden 7168) bf16, per forward (current)
    assert c.name == "SGLang DP-attention gathered buffer (per forward)"
    assert c.bytes == 128 * 1 * 8 * 7168 * 2 == 14_680_064
    assert c.where == "runtime" and not c.profiled
    per = scratch_terms(replace(ctx, dep=ctx.dep.with_(scratch="per-layer")))
    assert [(p.name, p.bytes) for p in per] == [
        ("SGLang DP-attention gathered buffer (persistent in the CUDA-graph pool)", 14_680_064)]
    assert _savings(ctx) == {"SGLang DP-attention gathered buffer": (14_680_064, 14_680_064)}


def test_sglang_gathered_buffer_defaults() -> None:
    # H200 (139.8 GiB < 160) at TP8: SGLang's cuda_graph_max_bs default 512; MTP: 2 tokens/request
    ctx = _ctx("deepseek-r1", "H200", num_speculative_tokens=1, **SGL)
    (c,) = scratch_terms(ctx)
    assert c.bytes == 512 * 2 * 8 * 7168 * 2
    assert scratch_terms(_ctx("deepseek-r1", "H200", engine="sglang", tp=8)) == []


# --- DeepSeek-V4-Pro on MI355X, AITER sparse MLA decode (seed 003) -------------------------------

V4: dict[str, Any] = {"tp": 8, "max_num_seqs": 64, "max_model_len": 262_144}
BLOCKS = 10_000
SWA_BF16 = BLOCKS * 64 * 512 * 2  # (num_blocks, 64, 1, 512) bf16
SWA_FP8 = BLOCKS * 64 * 512  # its fp8 cast
C4_EXTRA = BLOCKS * 64 * 512 * 3  # C4 scope: 64 entries per 256-token block, bf16 + fp8
C128_EXTRA = BLOCKS * 2 * 512 * 3  # C128 scope: 2 entries per block, bf16 + fp8
# prefill gather (4, M, 512) bf16, M = 262144 / 4 + 128 + 16384 (MI355X mnbt default)
GATHER = 4 * (65_536 + 128 + 16_384) * 512 * 2


def _io(topk: int) -> int:
    """One AITER scope's IO buffers at total_q = 64 decode rows and 16 local heads."""
    q = 64
    size = (q * 16 * 512  # q_fp8
            + q * 16 * 512 * 2  # out_buf bf16
            + q * topk * 4  # kv_indices int32
            + q * topk  # valid_mask bool
            + 2 * (q + 1) * 4  # qo_indptr, kv_indptr
            + q * 4  # kv_last_page_lens
            + 2 * 4  # q_scale, kv_scale
            + q * 4  # valid_lens
            + topk * 4)  # col_arange
    return size


def test_dsv4_aiter_hand_calculation() -> None:
    assert SWA_BF16 + SWA_FP8 + C4_EXTRA == BLOCKS * 192 * KiB == 1_966_080_000
    assert SWA_BF16 + SWA_FP8 + C128_EXTRA == 1_013_760_000
    assert GATHER == 336_068_608


def test_dsv4_aiter_per_layer() -> None:
    ctx = _ctx("deepseek-v4-pro", "MI355X", blocks=BLOCKS, scratch="per-layer", **V4)
    assert default_backend(ctx.spec, ctx.gpu, ctx.dep.kv_cache_dtype) == "aiter_mla"
    comps = _by_name(scratch_runtime_terms(ctx))
    c4 = comps["AITER DSv4 decode K dequant bf16+fp8 (per layer per step, C4 layers)"]
    c128 = comps["AITER DSv4 decode K dequant bf16+fp8 (per layer per step, C128 layers)"]
    assert (c4.count, c4.bytes_each) == (30, 1_966_080_000)
    assert (c128.count, c128.bytes_each) == (31, 1_013_760_000)
    assert not c4.profiled and c4.where == "runtime"
    io4 = comps["AITER DSv4 decode q_fp8/out/indices (per layer per step, C4 layers)"]
    io128 = comps["AITER DSv4 decode q_fp8/out/indices (per layer per step, C128 layers)"]
    # SWA scope top-k 128; extra scope: C4 index_topk 1024, C128 ceil(262144 / 128) = 2048
    assert io4.bytes_each == _io(128) + _io(1024) == 3_521_056
    assert io128.bytes_each == _io(128) + _io(2048) == 3_852_832
    (gather,) = scratch_budget_terms(ctx)
    assert gather.bytes == GATHER and gather.profiled and gather.where == "budget"
    save = _savings(ctx)
    assert save["AITER DSv4 decode K dequant bf16+fp8"] == (
        30 * 1_966_080_000 + 31 * 1_013_760_000, 1_966_080_000)


def test_dsv4_aiter_shared_is_one_workspace() -> None:
    ctx = _ctx("deepseek-v4-pro", "MI355X", blocks=BLOCKS, **V4)  # default policy: shared
    comps = _by_name(scratch_terms(ctx))
    gather = comps["DeepSeek-V4 prefill K gather (workspace)"]
    dq = comps["AITER DSv4 decode K dequant bf16+fp8 (shared)"]
    # one WorkspaceManager buffer: the prefill gather reserves 320.5 MiB at start-up (budget);
    # the first decode grows it to num_blocks × 192 KiB (runtime)
    assert gather.bytes == GATHER and gather.where == "budget"
    assert dq.bytes == 1_966_080_000 - GATHER and dq.where == "runtime"
    assert "grows" in dq.formula
    io = comps["AITER DSv4 decode q_fp8/out/indices (shared)"]
    assert (io.count, io.bytes) == (1, _io(128) + _io(2048))
    assert io.bytes == 3_852_832


def test_dsv4_budget_terms_do_not_read_the_kv_pool() -> None:
    before = _ctx("deepseek-v4-pro", "MI355X", scratch="per-layer", **V4)
    after = replace(before, num_gpu_blocks=BLOCKS)
    assert scratch_budget_terms(before) == scratch_budget_terms(after)
    assert all(c.bytes == 0 for c in scratch_runtime_terms(before) if "dequant" in c.name)
    assert sum(c.bytes for c in scratch_runtime_terms(after) if "dequant" in c.name) == (
        30 * 1_966_080_000 + 31 * 1_013_760_000)


def test_dsv4_per_step_copies_are_reused_without_cuda_graphs() -> None:
    ctx = _ctx("deepseek-v4-pro", "MI355X", blocks=BLOCKS, scratch="per-layer",
               enforce_eager=True, **V4)
    dq = [c for c in scratch_runtime_terms(ctx) if "dequant" in c.name]
    assert [(c.count, c.bytes) for c in dq] == [(1, 1_966_080_000)]
    assert "--enforce-eager" in dq[0].formula


def test_dsv4_flash_swa_only_layers() -> None:
    # V4-Flash: 21 C4 + 20 C128 + 2 SWA-only layers; SWA-only layers dequantise the SWA scope only
    ctx = _ctx("deepseek-v4-flash", "MI355X", blocks=100, tp=4, max_num_seqs=8,
               max_model_len=8192, scratch="per-layer")
    comps = scratch_runtime_terms(ctx)
    counts = Counter({c.name.split(", ")[-1].rstrip(")"): c.count for c in comps
                      if "dequant" in c.name})
    assert counts == {"C4 layers": 21, "C128 layers": 20, "SWA-only layers": 2}
    swa_only = next(c for c in comps if c.name.endswith("(per layer per step, SWA-only layers)")
                    and "dequant" in c.name)
    assert swa_only.bytes_each == 100 * 64 * 512 * 3


def test_dsv4_on_nvidia_has_only_the_prefill_gather() -> None:
    ctx = _ctx("deepseek-v4-pro", "H200", **V4)
    comps = scratch_terms(ctx)
    assert [c.name for c in comps] == ["DeepSeek-V4 prefill K gather (workspace)"]
    # H200 mnbt default 8192: M = 65536 + 128 + 8192
    assert comps[0].bytes == 4 * (65_536 + 128 + 8_192) * 512 * 2


# --- workspaces every engine has ------------------------------------------------------------------


def test_flashinfer_workspace_on_blackwell() -> None:
    ctx = _ctx("llama-3.1-8b", "B200")
    (c,) = scratch_terms(ctx)
    assert c.name == "FlashInfer workspace (workspace)" and c.bytes == 394 * MiB
    assert c.where == "runtime"
    assert scratch_terms(_ctx("llama-3.1-8b", "H100-80GB")) == []  # flash_attn: none


# --- backends -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "gpu", "kv", "expected"), [
    ("deepseek-r1", "B200", "auto", "cutlass_mla"),
    ("deepseek-r1", "H200", "auto", "flashmla"),
    ("deepseek-r1", "A100-80GB", "auto", "triton_mla"),
    ("deepseek-r1", "MI300X", "auto", "triton_mla"),
    ("deepseek-v4-pro", "MI355X", "auto", "aiter_mla"),
    ("deepseek-v4-pro", "B200", "auto", "flashmla"),
    ("qwen3-32b", "H200", "turboquant_k8v4", "turboquant"),
    ("qwen3-32b", "H200", "auto", "flash_attn"),
    ("qwen3-32b", "B200", "fp8", "flashinfer"),
    ("llama-3.1-8b", "MI325X", "auto", "triton_attn"),
])
def test_default_backend(model: str, gpu: str, kv: str, expected: str) -> None:
    assert default_backend(_spec(model), find_gpu(gpu), kv) == expected


@pytest.mark.parametrize(("model", "gpu", "kwargs", "words"), [
    ("qwen3-32b", "H200", {"attention_backend": "xformers"}, "unknown"),
    ("qwen3-32b", "H200", {"attention_backend": "turboquant"}, "TurboQuant KV cache"),
    ("qwen3-32b", "H200", {"attention_backend": "flash_attn",
                           "kv_cache_dtype": "turboquant_k8v4"}, "turboquant backend"),
    ("qwen3-32b", "B200", {"attention_backend": "cutlass_mla"}, "MLA backend"),
    ("deepseek-r1", "H200", {"attention_backend": "flash_attn"}, "cannot run"),
    ("deepseek-r1", "H200", {"attention_backend": "cutlass_mla"}, "SM100"),
    ("deepseek-r1", "H200", {"attention_backend": "aiter_mla"}, "AMD"),
    ("deepseek-r1", "MI300X", {"attention_backend": "flashmla"}, "NVIDIA"),
    ("deepseek-v4-pro", "B200", {"attention_backend": "cutlass_mla"}, "sparse"),
])
def test_bad_backends_are_rejected(model: str, gpu: str, kwargs: dict[str, Any],
                                   words: str) -> None:
    ctx = _ctx(model, gpu, **kwargs)
    with pytest.raises(BadInput) as err:
        scratch_terms(ctx)
    assert words in err.value.message and err.value.hint


def test_backend_names_are_case_insensitive() -> None:
    ctx = _ctx("deepseek-r1", "B200", tp=8, attention_backend="CUTLASS_MLA", scratch="per-layer")
    assert any(c.name == "CUTLASS MLA decode output (per layer)" for c in scratch_terms(ctx))


# --- invariants -----------------------------------------------------------------------------------

CASES = [
    ("qwen3-32b", "H200", {"kv_cache_dtype": "turboquant_k8v4"}),
    ("qwen3-0.6b", "H100-80GB", {"kv_cache_dtype": "turboquant_3bit_nc"}),
    ("llama-3.1-70b", "H200", {"kv_cache_dtype": "turboquant_k3v4_nc"}),
    ("deepseek-r1", "B200", {"attention_backend": "cutlass_mla"}),
    ("deepseek-r1", "B200", {"attention_backend": "flashinfer_mla"}),
    ("deepseek-v4-pro", "MI355X", {}),
    ("deepseek-v4-flash", "MI355X", {}),
    ("deepseek-r1", "H200", {"engine": "sglang", "enable_dp_attention": True, "dp": 2}),
]


@settings(max_examples=120, deadline=None)
@given(case=st.sampled_from(CASES), seqs=st.integers(1, 4096), tp=st.sampled_from([1, 2, 4, 8]),
       pp=st.sampled_from([1, 2, 3]), blocks=st.integers(0, 200_000), eager=st.booleans(),
       last=st.booleans())
def test_sharing_never_costs_more(case: tuple[str, str, dict[str, Any]], seqs: int, tp: int,
                                  pp: int, blocks: int, eager: bool, last: bool) -> None:
    model, gpu, extra = case
    kwargs = {"tp": tp, "pp": pp, "max_num_seqs": seqs, "enforce_eager": eager,
              "max_num_batched_tokens": max(8192, seqs), "max_model_len": 32_768, **extra}
    ctx = _ctx(model, gpu, blocks=blocks, rank=-1 if last else 0, **kwargs)
    for name, per, shared in scratch_savings(ctx):
        assert 0 <= shared <= per, name
    totals = {}
    for policy in ("per-layer", "shared"):
        sub = replace(ctx, dep=ctx.dep.with_(scratch=policy))
        comps = scratch_terms(sub)
        # the two halves partition the whole, and no term is a stand-in
        assert sorted(map(repr, scratch_budget_terms(sub) + scratch_runtime_terms(sub))) == \
            sorted(map(repr, comps))
        assert all(c.category == "scratch" and c.bytes >= 0 and not c.placeholder
                   and c.bytes == c.count * c.bytes_each for c in comps)
        totals[policy] = sum(c.bytes for c in comps)
    assert totals["shared"] <= totals["per-layer"]
