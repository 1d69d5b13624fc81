"""SGLang's EP-MoE on ROCm by release: from 0.4.8.post1 to 0.4.9.post4 ``EPMoE`` keeps
references to the block-fp8 experts it loaded (``w13_weight_fp8`` / ``w2_weight_fp8``) while the
aiter path swaps in shuffled copies, so every routed expert on a rank is held twice
(``SGLANG_ROCM_EPMOE_STALE_FP8``, ``memprof/core/weights/mlp.py``), against a hand calculation
and the one published log that shows it (sgl-project/sglang issue #7691).

DeepSeek-R1: H 7168, I (INTER) 2048, 256 routed experts on 58 MoE layers (61 layers, the first 3
dense), block-fp8 [128, 128]; EP8 puts 32 experts on each rank."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.releases import SGLANG_RELEASES
from memprof.core.terms.load_segments import NAME as SEGMENTS
from memprof.core.versions import resolve_version, value_at
from memprof.core.weights.mlp import SGLANG_ROCM_EPMOE_STALE_FP8

E_LOCAL, H, INTER, MOE_LAYERS, BLOCK = 32, 7168, 2048, 58, 128
# one MoE layer's loaded copy: w13 [32, 2·I, H] + w2 [32, H, I] in fp8 (1 B), and on gfx94x
# (e4m3fnuz) the fp32 block scales normalize_e4m3fn_to_e4m3fnuz replaced:
# w13 [32, 2·I/128, H/128] + w2 [32, H/128, I/128]
WEIGHTS = E_LOCAL * (2 * INTER * H + H * INTER)
SCALES = E_LOCAL * (2 * (INTER // BLOCK) * (H // BLOCK) + (H // BLOCK) * (INTER // BLOCK)) * 4
STALE_GFX942 = MOE_LAYERS * (WEIGHTS + SCALES)  # 81,758,552,064 B = 76.14 GiB


def weights(version: str, gpu: str = "MI300X", ep: bool = True) -> int:
    """The largest rank's weights, less the allocator's segments beyond them
    (``memprof/core/terms/load_segments.py``: their rounding differs with the tensors held)."""
    dep = Deployment(engine="sglang", engine_version=version, tp=8, dp=8,
                     enable_dp_attention=True, enable_expert_parallel=ep)
    return max(r.weights_bytes - sum(c.bytes for c in r.components if c.name == SEGMENTS)
               for r in estimate("deepseek-r1", dep, gpu=find_gpu(gpu)).ranks)


def test_the_post_releases_are_modelled_in_order() -> None:
    at = SGLANG_RELEASES.index
    assert at("0.4.8") < at("0.4.8.post1") < at("0.4.9") < at("0.4.9.post5") < at("0.4.10")
    assert resolve_version("0.4.8.post1", "sglang") == "0.4.8.post1"
    held = {v: value_at(SGLANG_ROCM_EPMOE_STALE_FP8, v, None, engine="sglang")
            for v in ("0.4.7", "0.4.8", "0.4.8.post1", "0.4.9", "0.4.9.post5", "0.4.10",
                      "main@d315eb7")}
    assert held == {"0.4.7": False, "0.4.8": False, "0.4.8.post1": True, "0.4.9": True,
                    "0.4.9.post5": False, "0.4.10": False, "main@d315eb7": False}
    # a vLLM deployment reads none of SGLang's rows
    assert value_at(SGLANG_ROCM_EPMOE_STALE_FP8, "0.9.0", None) is None


def test_the_stale_copy_matches_the_hand_calculation() -> None:
    assert STALE_GFX942 == 81_758_552_064
    base = weights("0.4.8")
    for v in ("0.4.8.post1", "0.4.9"):
        assert weights(v) - base == STALE_GFX942
    for v in ("0.4.9.post5", "0.4.10"):
        assert weights(v) == base


@pytest.mark.parametrize(("gpu", "ep"), [("H200", True), ("MI300X", False)])
def test_only_ep_moe_on_rocm_holds_it(gpu: str, ep: bool) -> None:
    # CUDA keeps no aiter shuffle; without EP the experts are FusedMoE's (no EPMoE tuple)
    assert weights("0.4.8.post1", gpu, ep) == weights("0.4.8", gpu, ep)


def test_issue_7691_load_figure() -> None:
    # "Load weight end. ... mem usage=166.59 GB" on rank 0 (DeepSeek-R1, --tp-size 8
    # --enable-ep-moe --dp-size 8 --enable-dp-attention, lmsysorg/sglang:v0.4.8.post1-rocm630-srt
    # on MI300X); SGLang's GB is GiB. Without the stale copy memprof would say 89.75 GiB.
    logged = 166.59 * 2**30
    assert abs(weights("0.4.8.post1") - logged) / logged < 0.01
    assert abs(weights("0.4.8") - logged) / logged > 0.4


def test_a_log_naming_a_post_release_is_placed_on_the_modelled_one() -> None:
    from memprof.probes.sglang_log import modelled_release, named_release

    tag = "update results in lmsysorg/sglang:v0.4.8.post1-rocm630-srt"
    assert named_release(tag) == "0.4.8.post1"
    assert modelled_release("0.4.8.post1") == ("0.4.8.post1", "")
    assert modelled_release("0.4.9.post2")[0] == "0.4.9"
    assert modelled_release("0.4.9.post6")[0] == "0.4.9.post5"
