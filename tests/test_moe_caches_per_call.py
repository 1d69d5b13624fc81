"""The Triton fused-MoE caches of vLLM 0.8.0-0.13.x live per call
(memprof/core/terms/moe_caches.py): hand counts for the block-fp8 Qwen3-235B-A22B deployments of
published rows 32 (TP 4, 0.9.2) and 506 (TP 8 with expert parallelism, 0.10.0), and the
releases / methods the rule leaves alone.

``fused_experts_impl`` (0.9.2 / 0.10.0 model_executor/layers/fused_moe/fused_moe.py) per chunk of
M = min(T, 32768) tokens: ``cache13`` [M·k·max(N, K)] and ``intermediate_cache2`` [M·k, N/2] in
bf16, N = 2·I_l, K = H; the fp8 inputs of the two GEMMs [M, K] and [M·k, N/2] (1 B) with fp32
per-token-group scales (group 128), all live at the w2 GEMM."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate, rank_context
from memprof.core.models.spec import QuantConfig
from memprof.core.terms.activation import _activation_stages, activation_stages
from memprof.core.terms.moe_caches import fp8_input_quant_bytes, triton_caches_per_call

H, K_TOP, I_MOE, GROUP = 4096, 8, 1536, 128  # Qwen3-235B-A22B config.json
T = 8192  # max_num_batched_tokens, V1 default for serve at these releases
WORKSPACE = "fused-MoE workspace (WorkspaceManager)"
BLOCK_FP8 = QuantConfig(method="fp8", block=(128, 128))


def _hand(i_l: int) -> int:
    cache13 = T * K_TOP * max(2 * i_l, H) * 2
    cache2 = T * K_TOP * i_l * 2
    q = T * H + T * K_TOP * i_l
    scales = (T * (H // GROUP) + T * K_TOP * (i_l // GROUP)) * 4
    return cache13 + cache2 + q + scales


def _caches(version: str, **kw: object) -> tuple[int, dict[str, int]]:
    e = estimate("qwen3-235b-a22b-fp8", Deployment(engine_version=version, **kw),  # type: ignore[arg-type]
                 gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    bare = {s.name: s.bytes for s in activation_stages(ctx)}
    full = {s.name: s.bytes for s in _activation_stages(ctx, moe_caches=True)}
    comps = {c.name: c.bytes for c in e.ranks[0].components}
    return full["MoE"] - bare["MoE"], comps


def test_row32_tp4_0_9_2_caches_per_call_not_beside_the_sampler() -> None:
    caches, comps = _caches("0.9.2", tp=4, max_model_len=40960)
    assert caches == _hand(I_MOE // 4) == 647_757_824
    assert WORKSPACE not in comps
    # the sampler's stage (1,024 rows x 151,936 vocab, sorted) is the peak, not the MoE layer
    e = estimate("qwen3-235b-a22b-fp8", Deployment(engine_version="0.9.2", tp=4,
                                                   max_model_len=40960), gpu_name="H100")
    top = max(_activation_stages(rank_context(e, e.ranks[0]), moe_caches=True),
              key=lambda s: s.bytes)
    assert top.name == "sampler"
    # row 32's log: 178,880 tokens; the persistent 1 GiB workspace left memprof at 157,104
    assert abs(e.kv_cache_tokens / 178_880 - 1) < 0.02


def test_row506_ep8_0_10_0_full_intermediate_per_rank() -> None:
    caches, comps = _caches("0.10.0", tp=8, enable_expert_parallel=True, max_model_len=32768,
                            kv_cache_dtype="fp8")
    assert caches == _hand(I_MOE) == 876_609_536  # EP: every rank holds whole experts
    assert WORKSPACE not in comps


def test_the_moe_stage_is_the_peak_with_few_sampler_rows() -> None:
    # 8 sequences: the sampler stage is small and the MoE layer with its caches sets the peak
    e = estimate("qwen3-235b-a22b-fp8", Deployment(engine_version="0.10.0", tp=4,
                                                   max_model_len=40960, max_num_seqs=8),
                 gpu_name="H100")
    ctx = rank_context(e, e.ranks[0])
    moe = {s.name: s.bytes for s in activation_stages(ctx)}["MoE"]
    comps = {c.name: c.bytes for c in e.ranks[0].components}
    assert comps["activation peak (profile run)"] == moe + _hand(I_MOE // 4)


@pytest.mark.parametrize("version", ["0.14.0", "0.14.1", "0.27.1"])
def test_the_modular_kernel_keeps_its_workspace_from_0_14(version: str) -> None:
    _c, comps = _caches(version, tp=4, max_model_len=40960)
    assert comps[WORKSPACE] == T * K_TOP * (max(I_MOE // 4, H) + max(I_MOE // 2, H)) * 2


def test_methods_and_engines_the_rule_leaves_alone() -> None:
    dep = Deployment(engine_version="0.10.0")
    assert triton_caches_per_call(dep, None, "sm90") == "cache13"
    assert triton_caches_per_call(dep, BLOCK_FP8, "sm90") == "cache13"
    assert triton_caches_per_call(dep, QuantConfig(method="fp8_per_tensor", source="flag"),
                                  "gfx942") == "cache13"
    # fp8 below sm89 runs Marlin; AWQ / compressed-tensors / MXFP4 were not read
    assert triton_caches_per_call(dep, BLOCK_FP8, "sm80") is None
    assert triton_caches_per_call(dep, QuantConfig(method="awq", bits=4, group_size=128),
                                  "sm90") is None
    ct = QuantConfig(method="fp8", block=(128, 128), checkpoint_format="compressed-tensors")
    assert triton_caches_per_call(dep, ct, "sm90") is None
    assert triton_caches_per_call(Deployment(engine_version="0.13.0"), None, "sm90") == "cache13"
    assert triton_caches_per_call(Deployment(engine_version="0.14.0"), None, "sm90") is None
    assert triton_caches_per_call(Deployment(engine_version="0.7.3"), None, "sm90") is None
    assert triton_caches_per_call(Deployment(engine="sglang", engine_version="0.5.4"), None,
                                  "sm90") is None


def test_fp8_input_quant_per_tensor_and_before_0_9() -> None:
    dep = Deployment(engine_version="0.10.0")
    per_tensor = QuantConfig(method="fp8_per_tensor")
    assert fp8_input_quant_bytes(dep, per_tensor, "sm90", 100, 8, 4096, 384) == (
        100 * 4096 + 100 * 8 * 384 + 2 * 4)
    assert fp8_input_quant_bytes(dep, None, "sm90", 100, 8, 4096, 384) == 0
    assert fp8_input_quant_bytes(Deployment(engine_version="0.8.5"), BLOCK_FP8, "sm90",
                                 100, 8, 4096, 384) == 0
