"""The bundled Qwen/Qwen3-30B-A3B-FP8 config (``configs/models/qwen3-30b-a3b-fp8.json``), added for
published row 1455 (an SGLang log of 2026-08-27 that loads this checkpoint on one H100): it is the
bundled bf16 Qwen3-30B-A3B config plus the checkpoint's block-fp8 ``quantization_config``, and
memprof resolves it by its Hugging Face id and loads it as a block-fp8 checkpoint whose per-rank
weights are the log's "Load weight end ... mem usage" figure.

Source of the config: the checkpoint's config.json as vendored in the xiaowanCN/aiconfigurator
fork of aiconfigurator at commit 5f2e6bb0 (the file the config's ``_source`` names).
"""

from __future__ import annotations

import json

from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.models import bundled_models, load_model

FP8 = "qwen3-30b-a3b-fp8"


def test_the_fp8_config_is_the_bf16_one_with_its_quantization_config() -> None:
    fp8 = json.loads(bundled_models()[FP8].read_text())
    bf16 = json.loads(bundled_models()["qwen3-30b-a3b"].read_text())
    q = fp8.pop("quantization_config")
    strip = {"_source", "_hf_ids"}
    assert {k: v for k, v in fp8.items() if k not in strip} == {
        k: v for k, v in bf16.items() if k not in strip}
    assert (q["quant_method"], q["fmt"], q["weight_block_size"], q["activation_scheme"]) == (
        "fp8", "e4m3", [128, 128], "dynamic")
    # lm_head and, for each of the 48 layers, its two norms and its router gate
    assert len(q["modules_to_not_convert"]) == 1 + 3 * 48
    assert fp8["_hf_ids"] == ["Qwen/Qwen3-30B-A3B-FP8"]


def test_it_resolves_by_its_hf_id_as_a_block_fp8_checkpoint() -> None:
    spec = load_model("Qwen/Qwen3-30B-A3B-FP8")
    assert spec.name == FP8
    assert spec.quant is not None
    assert (spec.quant.method, spec.quant.block) == ("fp8", (128, 128))


def test_one_h100_at_tp1_loads_the_logged_weights() -> None:
    """Row 1455's log: "Load weight end. ... quant=fp8, fmt=e4m3, ..., mem usage=29.15 GB" (the
    drop in free memory SGLang prints; memprof's load figure is the weights plus the first
    kernel's non-torch memory at TP1). Within 0.5%: the bf16 model would be about 56.9 GiB."""
    dep = Deployment(engine="sglang", engine_version="main@d315eb7", tp=1,
                     mem_fraction_static=0.83)
    e = estimate(FP8, dep, gpu_name="H100")
    bf16 = estimate("qwen3-30b-a3b", dep, gpu_name="H100")
    assert abs(e.weights_bytes_max / GiB - 29.15) / 29.15 < 0.005
    assert bf16.weights_bytes_max > 1.9 * e.weights_bytes_max
