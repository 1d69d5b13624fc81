"""MXFP4 MoE on Hopper by vLLM release (issue 13 item 2), each rule against a hand calculation.

gpt-oss-120b: H 2880, I 2880, 128 experts, 36 layers, expert biases; TP1 on SM90."""

import pytest

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.weights import rank_weights
from memprof.core.weights.mlp import mxfp4_moe_layout, mxfp4_sm90_backend

E, H, N_I = 128, 2880, 2880


def experts(version: str) -> dict[str, int]:
    """bytes per layer of each expert tensor, by parameter name."""
    spec = load_model("gpt-oss-120b")
    dep = Deployment(engine_version=version)
    out: dict[str, int] = {}
    for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], "sm90"):
        if ".mlp.experts" in t.module:
            assert t.count == 36
            out[t.module.split(".mlp.experts")[-1] or "values+scales"] = t.bytes_each
    return out


@pytest.mark.parametrize(("version", "backend"), [
    ("0.10.1", "marlin"), ("0.11.2", "marlin"), ("0.12.0", "triton"), ("0.33.0", "triton")])
def test_sm90_backend_by_release(version: str, backend: str) -> None:
    # 0.10.1 quantization/mxfp4.py Mxfp4MoEMethod._should_use_marlin: Marlin when
    # `not has_triton_kernels()` — the 0.10.1-0.11.2 wheels ship no triton_kernels; from 0.12.0
    # the wheel bundles vllm/third_party/triton_kernels and get_mxfp4_backend returns TRITON.
    assert mxfp4_sm90_backend(version) == backend


def test_marlin_pads_i_to_128_and_h_to_256_and_keeps_biases_in_bf16() -> None:
    # 0.11.0 quantization/mxfp4.py create_weights (use_marlin): "n % 256 == 0 and k % 128 == 0",
    # I round_up(2880, 128) = 2944, H round_up(2880, 256) = 3072; marlin_utils_fp4.py
    # prepare_moe_fp4_layer_for_marlin: scales back to e8m0 (mxfp4_marlin_process_scales), biases
    # `getattr(layer, name).to(param_dtype)` (bf16).
    assert mxfp4_moe_layout("sm90", "0.11.0") == (128, 256, 1)
    ip, hp = 2944, 3072
    values_scales = 2 * ip * hp // 2 + 2 * ip * (hp // 32) + hp * ip // 2 + hp * (ip // 32)
    got = experts("0.11.0")
    assert got["values+scales"] == E * values_scales
    assert got[".w13_bias"] == E * 2 * ip * 2
    assert got[".w2_bias"] == E * hp * 2
    assert ".raw_scales" not in got


def test_triton_scale_layout_pads_rows_to_256_and_columns_to_2() -> None:
    # vllm/third_party/triton_kernels/tensor_details/layout_details/hopper_scale.py (0.25.0)
    # HopperMXScaleLayout.swizzle_data: SWIZZLE_ALIGN_M = 2 * num_warps * 2 * 8 = 256 (8 warps),
    # SWIZZLE_ALIGN_K = 2. I to 64 (2880 stays), H unchanged; biases fp32.
    assert mxfp4_moe_layout("sm90", "0.25.0") == (64, 1, 256)
    w13 = 2 * N_I * H // 2 + 5888 * 90  # 5760 scale rows → 5888; 90 columns (even already)
    w2 = H * N_I // 2 + 3072 * 90  # 2880 → 3072
    got = experts("0.25.0")
    assert got["values+scales"] == E * (w13 + w2)
    assert got[".w13_bias"] == E * 2 * N_I * 4 and got[".w2_bias"] == E * H * 4


def test_triton_keeps_raw_e8m0_scales_until_0_25_0() -> None:
    # 0.24.0 fused_moe/oracle/mxfp4.py (TRITON branch) deletes only the weights; vLLM PR #46549
    # (0.25.0) adds `del layer.w13_weight_scale` / `del layer.w2_weight_scale`.
    raw = E * (2 * N_I * (H // 32) + H * (N_I // 32))  # 128 × (5760×90 + 2880×90) B = 99,532,800
    assert experts("0.24.0")[".raw_scales"] == raw == 99_532_800
    assert ".raw_scales" not in experts("0.25.0")
    assert experts("0.24.0")["values+scales"] == experts("0.25.0")["values+scales"]
