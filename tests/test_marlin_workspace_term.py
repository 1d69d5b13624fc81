"""The Marlin workspace term (``memprof.core.terms.marlin_workspace``): one
``sm_count × blocks`` int32 buffer per Marlin layer, against hand counts."""

from __future__ import annotations

from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import catalog, resolve_gpu

DEP = Deployment(max_model_len=4096)


def _marlin(e: object) -> list[Component]:
    ranks = e.ranks  # type: ignore[attr-defined]
    return [c for c in ranks[0].components if c.name == "Marlin workspaces"]


def test_online_fp8_on_ampere_has_one_workspace_per_linear() -> None:
    # Qwen3-0.6B: 28 layers × (qkv_proj, o_proj, gate_up_proj, down_proj) = 112 Marlin linears
    # (one workspace per fused qkv); A100: 108 SMs
    e = estimate("qwen3-0.6b", DEP.with_(quantization="fp8"), gpu_name="A100-80GB")
    (c,) = _marlin(e)
    assert (c.count, c.bytes, c.category, c.where) == (112, 112 * 108 * 4, "weights", "budget")
    assert not _marlin(estimate("qwen3-0.6b", DEP.with_(quantization="fp8"), gpu_name="H100"))
    assert not _marlin(estimate("qwen3-0.6b", DEP, gpu_name="A100-80GB"))


def test_mxfp4_experts_on_marlin_take_four_blocks_per_sm() -> None:
    # gpt-oss-120b on A100: 36 MoE layers on Marlin (prepare_moe_fp4_layer_for_marlin), 108 SMs
    (c,) = _marlin(estimate("gpt-oss-120b", DEP, gpu_name="A100-80GB"))
    assert (c.count, c.bytes) == (36, 36 * 108 * 4 * 4)
    assert not _marlin(estimate("gpt-oss-120b", DEP, gpu_name="B200"))


def test_an_unknown_sm_count_is_a_stated_placeholder() -> None:
    gpu = resolve_gpu(None, 80 << 30, "sm80")
    assert gpu.sm_count is None
    (c,) = _marlin(estimate("qwen3-0.6b", DEP.with_(quantization="fp8"), gpu=gpu))
    assert c.placeholder and c.bytes == 0 and "SM count not in the catalog" in c.formula


def test_catalog_sm_counts_are_cuda_cores_over_cores_per_sm() -> None:
    by = {g.name: g for g in catalog()}
    assert (by["H100-80GB"].sm_count, by["H100-PCIe"].sm_count, by["A100-80GB"].sm_count,
            by["L40S"].sm_count, by["T4"].sm_count, by["RTX-4090"].sm_count) == (
        132, 114, 108, 142, 40, 128)
    assert all(g.sm_count for g in catalog())  # ROCm rows: HIP's compute units (no Marlin)
