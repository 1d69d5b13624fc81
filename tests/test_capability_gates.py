"""Compute-capability gates (``memprof.core.capability``, vLLM v0.11.0): what vLLM refuses on a
CUDA GPU's capability is an ``error:``, and what it runs differently (bf16 → fp16, fp8 W8A8 →
Marlin fp8 weight-only) is stated and, where storage changes, sized."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.core.capability import GATES, QUANT_MIN_CC, check_capability, cuda_cc
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu, unlisted_gpu
from memprof.core.models import QuantConfig
from memprof.core.weights.formats import linear_bytes, linear_params
from tests.test_did_you_mean import call, error_and_hint

DEP = Deployment(max_model_len=4096)


def _tensor(e: object, module: str) -> int:
    ranks = e.ranks  # type: ignore[attr-defined]
    return int(next(t.bytes_each for t in ranks[0].tensors if t.module == module))


def test_capabilities_read_from_the_architecture() -> None:
    assert [cuda_cc(find_gpu(n)) for n in ("T4", "V100-32GB", "A100-80GB", "L40S", "H100",
                                           "B200")] == [75, 70, 80, 89, 90, 100]
    assert cuda_cc(find_gpu("MI300X")) is None and cuda_cc(unlisted_gpu(1 << 34)) is None


def test_every_gate_and_minimum_cites_a_vllm_file() -> None:
    for g in GATES:
        assert "vllm/" in g.source and ".py" in g.source, g.feature
    for method, (cc, source) in QUANT_MIN_CC.items():
        assert 60 <= cc <= 100 and source.startswith("vllm/model_executor/layers/quantization/")
        assert ".py" in source and "get_min_capability" in source, method


def test_explicit_bfloat16_below_8_0_is_refused_as_vllm_does() -> None:
    error, hint = error_and_hint(["estimate", "-m", "qwen3-0.6b", "--gpu", "T4", "--dtype",
                                  "bfloat16"])
    assert error == ("error: --dtype bfloat16 on T4 (compute capability 7.5): vLLM supports "
                     "bfloat16 from compute capability 8.0")
    assert "--dtype float16" in hint
    code, _, err = call("estimate", "-m", "qwen3-0.6b", "--gpu", "A100-80GB", "--dtype",
                        "bfloat16")
    assert code == 0, err


def test_auto_dtype_below_8_0_is_float16_with_the_same_bytes_and_says_so() -> None:
    auto = estimate("qwen3-0.6b", DEP, gpu_name="T4")
    half = estimate("qwen3-0.6b", DEP.with_(dtype="float16"), gpu_name="T4")
    assert auto.weights_bytes_max == half.weights_bytes_max
    assert auto.kv_cache_tokens == half.kv_cache_tokens
    assert any(n.startswith("capability 7.5 < 8.0: vLLM serves this bfloat16 checkpoint in "
                            "float16") for n in auto.notes)
    assert not any(n.startswith("capability") for n in
                   estimate("qwen3-0.6b", DEP, gpu_name="A100-80GB").notes)


@pytest.mark.parametrize(("gpu", "quant", "refused"), [
    ("T4", "fp8", True),            # Fp8Config: 80
    ("A100-80GB", "fp8", False),
    ("V100-32GB", "awq", True),     # AWQConfig: 75
    ("T4", "awq", False),
    ("V100-32GB", "gptq", False),   # GPTQConfig: 60
    ("T4", "modelopt", True),       # ModelOptFp8Config: 89
    ("A100-80GB", "modelopt", True),
    ("L40S", "modelopt", False),
    ("MI300X", "fp8", False),       # ROCm: no compute capability gate
])
def test_quantisation_below_its_minimum_capability_is_refused(gpu: str, quant: str,
                                                              refused: bool) -> None:
    argv = ["estimate", "-m", "qwen3-0.6b", "--gpu", gpu, "-q", quant, "--dtype", "float16"]
    if refused:
        error, hint = error_and_hint(argv)
        assert error.startswith("error: quantization ") and "needs compute capability" in error
        assert "Minimum" not in error and "get_min_capability" in error
        assert hint.startswith("hint: pick a GPU")
    else:
        code, _, err = call(*argv)
        assert code in (0, 1), err


def test_the_check_reads_the_explicit_dtype_not_the_resolved_one() -> None:
    t4 = find_gpu("T4")
    check_capability(t4, "auto", None)
    check_capability(t4, "float16", QuantConfig(method="gptq", group_size=128, bits=4))
    with pytest.raises(BadInput):
        check_capability(t4, "bf16", None)


def test_online_fp8_below_8_9_is_marlin_weight_only() -> None:
    # Qwen3-0.6B q_proj: 16 heads × 128 = 2048 outputs, 1024 inputs. W8A8 on Hopper: the fp8
    # weight + one fp32 scale; Marlin on Ampere: the same weight bytes + 2048 bf16 channel
    # scales (prepare_fp8_layer_for_marlin: the per-tensor scale repeated over size_n)
    module = "model.layers.*.self_attn.qkv_proj(q)"
    hopper = estimate("qwen3-0.6b", DEP.with_(quantization="fp8"), gpu_name="H100")
    ampere = estimate("qwen3-0.6b", DEP.with_(quantization="fp8"), gpu_name="A100-80GB")
    assert _tensor(hopper, module) == 2048 * 1024 + 4
    assert _tensor(ampere, module) == 2048 * 1024 + 2048 * 2
    assert any("fp8 runs weight-only on Marlin" in n for n in ampere.notes)
    rocm = estimate("qwen3-0.6b", DEP.with_(quantization="fp8"), gpu_name="MI300X")
    assert _tensor(rocm, module) == 2048 * 1024 + 4  # ROCm keeps W8A8 (use_marlin = False)


def test_block_fp8_below_8_9_turns_block_scales_into_marlin_group_scales() -> None:
    # DeepSeek-R1 q_b_proj at TP8: 24576/8 = 3072 outputs × 1536 inputs, blocks 128×128.
    # Hopper: fp32 block scales 24×12; Ampere Marlin: bf16 group scales (1536/128=12) × 3072
    module = "model.layers.*.self_attn.q_b_proj"
    dep = Deployment(tp=8, max_model_len=4096)
    hopper = estimate("deepseek-r1", dep, gpu_name="H100")
    ampere = estimate("deepseek-r1", dep, gpu_name="A100-80GB")
    assert _tensor(hopper, module) == 3072 * 1536 + 4 * 24 * 12
    assert _tensor(ampere, module) == 3072 * 1536 + 2 * 12 * 3072


@pytest.mark.parametrize("quant", [
    QuantConfig(method="fp8", block=(128, 128)),
    QuantConfig(method="fp8_per_tensor", source="flag"),
    QuantConfig(method="fp8_per_channel"),
])
@pytest.mark.parametrize("arch", ["sm80", "sm86", "sm75", "sm89", "sm90", "gfx942", "unknown"])
def test_marlin_params_add_up_to_the_bytes(quant: QuantConfig, arch: str) -> None:
    for out, inn in ((3072, 1536), (1000, 777), (129280, 7168)):
        got = sum(p.bytes for p in linear_params(out, inn, quant, "bfloat16", arch))
        assert got == linear_bytes(out, inn, quant, 2, arch)[0], (out, inn, arch)


def test_nvfp4_below_10_0_is_stated_without_moving_its_storage() -> None:
    h100 = estimate("deepseek-r1-nvfp4", Deployment(tp=8, max_model_len=4096), gpu_name="H100")
    assert any(n.startswith("capability 9.0 < 10.0: no CUTLASS FP4 GEMM") for n in h100.notes)
    b200 = estimate("deepseek-r1-nvfp4", Deployment(tp=8, max_model_len=4096), gpu_name="B200")
    assert not any(n.startswith("capability") for n in b200.notes)


def test_block_fp8_experts_below_8_9_are_marlin_too() -> None:
    # DeepSeek-R1 experts at TP8 (no EP): 256 experts, I = 2048/8 = 256, H = 7168. Marlin
    # (prepare_moe_fp8_layer_for_marlin): w13 (E, 2I, H) fp8 + (E, H/128, 2I) bf16 scales,
    # w2 (E, H, I) fp8 + (E, I/128, H) bf16 scales
    dep = Deployment(tp=8, max_model_len=4096)
    e, i, h = 256, 256, 7168
    ampere = estimate("deepseek-r1", dep, gpu_name="A100-80GB")
    want = e * (2 * i * h + (h // 128) * 2 * i * 2 + h * i + (i // 128) * h * 2)
    assert _tensor(ampere, "model.layers.*.mlp.experts") == want
    hopper = estimate("deepseek-r1", dep, gpu_name="H100")
    fp32_blocks = e * 4 * (2 * (i // 128) * (h // 128) + (h // 128) * (i // 128))
    assert _tensor(hopper, "model.layers.*.mlp.experts") == e * 3 * i * h + fp32_blocks
