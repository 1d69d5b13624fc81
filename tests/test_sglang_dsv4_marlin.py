"""SGLang's DeepSeek-V4 MXFP4 experts on Hopper by source snapshot: the loader's fp32
``w13/w2_weight_scale_inv`` left registered after the Marlin repack before SGLang PR #29797
(``SGLANG_MARLIN_STALE_SCALE_INV``), against a hand calculation.

DeepSeek-V4-Pro: H 7168, I 3072, 384 routed experts, 61 layers; TP8 without EP, so each rank
holds all 384 experts at I/8 = 384."""

import pytest

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import load_model
from memprof.core.releases import SGLANG_RELEASES
from memprof.core.versions import resolve_version, value_at
from memprof.core.weights import rank_weights
from memprof.core.weights.mlp import SGLANG_MARLIN_STALE_SCALE_INV

HOPPER = "deepseek-v4-hopper@2026-07"
E, H, I_LOCAL, LAYERS = 384, 7168, 3072 // 8, 61


def experts(dep: Deployment, arch: str) -> dict[str, int]:
    """bytes per layer of each routed-expert tensor group of rank 0, by module suffix."""
    spec = load_model("deepseek-v4-pro")
    out: dict[str, int] = {}
    for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], arch):
        if t.module.endswith((".experts", ".experts.stale_scale_inv")):
            assert t.count == LAYERS
            out[t.module.split(".experts")[-1] or "values+scales"] = t.bytes_each
    return out


def test_snapshots_are_ordered_and_resolve() -> None:
    # the snapshots stand among the numbered releases by date (memprof/core/releases.py)
    assert SGLANG_RELEASES.index("0.5.14") + 1 == SGLANG_RELEASES.index(HOPPER)
    assert SGLANG_RELEASES.index("0.5.9") < SGLANG_RELEASES.index(HOPPER)
    assert resolve_version(None, "sglang") == "0.5.23"
    assert resolve_version(HOPPER, "sglang") == HOPPER
    assert value_at(SGLANG_MARLIN_STALE_SCALE_INV, HOPPER, None, engine="sglang") is True
    assert value_at(SGLANG_MARLIN_STALE_SCALE_INV, None, None, engine="sglang") is False
    # a release before 0.5.12 has no Hopper MXFP4 Marlin path: no row holds
    assert value_at(SGLANG_MARLIN_STALE_SCALE_INV, "0.5.9", None, engine="sglang") is None
    assert value_at(SGLANG_MARLIN_STALE_SCALE_INV, "0.5.11", None, engine="sglang") is None
    # an SGLang row never holds for vLLM
    assert value_at(SGLANG_MARLIN_STALE_SCALE_INV, "0.33.0", None) is None


def test_stale_fp32_scale_inv_kept_before_pr_29797() -> None:
    # sgl-project/sglang@00563d36 layers/quantization/fp8.py Fp8MoEMethod.create_fp8_moe_weight_
    # (is_fp4_expert): w13_weight_scale_inv (E, 2·I/tp, H/32) and w2_weight_scale_inv
    # (E, H, I/tp/32), `torch.float32` off ROCm/XPU (`fp4_scale_dtype`). marlin_utils_fp4.py
    # prepare_moe_mxfp4_layer_for_marlin (before PR #29797) writes the e8m0 Marlin scales to
    # w13/w2_weight_scale and leaves both *_weight_scale_inv registered.
    w13 = E * (2 * I_LOCAL) * (H // 32) * 4  # 384 × 768 × 224 × 4 B = 264,241,152
    w2 = E * H * (I_LOCAL // 32) * 4  # 384 × 7168 × 12 × 4 B = 132,120,576
    assert (w13, w2) == (264_241_152, 132_120_576)
    old = experts(Deployment(engine="sglang", tp=8, engine_version=HOPPER), "sm90")
    assert old[".stale_scale_inv"] == w13 + w2 == 396_361_728
    assert LAYERS * (w13 + w2) == 24_178_065_408  # 22.52 GiB per rank
    new = experts(Deployment(engine="sglang", tp=8), "sm90")
    assert ".stale_scale_inv" not in new  # PR #29797: _discard_mxfp4_marlin_repack_inputs
    assert old["values+scales"] == new["values+scales"]


@pytest.mark.parametrize("dep", [
    Deployment(engine="sglang", tp=8, engine_version=HOPPER),  # not Hopper: no Marlin path
    Deployment(tp=8),  # vLLM
])
def test_only_sglang_hopper_marlin_keeps_them(dep: Deployment) -> None:
    arch = "sm100" if dep.sglang else "sm90"
    assert ".stale_scale_inv" not in experts(dep, arch)


def test_sglang_dsv4_rope_buffers_one_pair_per_theta() -> None:
    # SGLang models/deepseek_v4.py MQALayer.__init__ (sgl-project/sglang@000328a8): a cached
    # get_rope (DeepseekScalingRotaryEmbedding, fp32 on CUDA: 65536 × 16 positions × 64 × 4 B)
    # and freqs_cis from the @lru_cache(2) precompute_freqs_cis (complex64, 1,048,576 × 32 × 8 B)
    # per rope_base. Pro: every main layer is compressed (one θ); Flash has 2 SWA-only layers
    # (θ = rope_theta) beside the compressed ones (two θ).
    from memprof.core.estimate import estimate

    each = 1_048_576 * 64 * 4
    assert each == 1_048_576 * 32 * 8 == 268_435_456
    for model, thetas in (("deepseek-v4-pro", 1), ("deepseek-v4-flash", 2)):
        e = estimate(model, Deployment(engine="sglang", tp=8), gpu_name="H200")
        rope = [c for c in e.ranks[0].components
                if c.name.startswith(("RoPE cos/sin cache", "DeepSeek-V4 freqs_cis"))]
        assert len(rope) == 2 * thetas and all(c.bytes == each for c in rope)
    e = estimate("qwen3-32b", Deployment(engine="sglang"), gpu_name="H200")
    # any other model: SGLang's get_rope cache, fp32 on CUDA (40,960 positions × 128 × 4 B)
    rope = [c for c in e.ranks[0].components if "RoPE" in c.name]
    assert [c.bytes for c in rope] == [40_960 * 128 * 4]
