"""ModelOpt checkpoints (``quant_method: modelopt``) as vLLM v0.11.0 reads them: both config
layouts, FP8's static scales, NVFP4, exclude lists, and the capability each needs."""

from __future__ import annotations

import json

import pytest

from memprof.base.errors import ConfigError
from memprof.core.capability import vllm_method
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.models import quant_from_config
from tests.test_did_you_mean import call, error_and_hint

NESTED_FP8 = {"quant_method": "modelopt",
              "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                               "exclude_modules": ["lm_head"]}}


def _tensors(quant: dict[str, object], gpu: str = "H100") -> dict[str, int]:
    dep = Deployment(max_model_len=4096,
                     hf_overrides=json.dumps({"quantization_config": quant}))
    e = estimate("llama-3.1-8b", dep, gpu_name=gpu)
    return {t.module: t.bytes_each for t in e.ranks[0].tensors}


def test_the_hf_quant_config_layout_is_read_with_its_exclude_list() -> None:
    q = quant_from_config({"quantization_config": NESTED_FP8})
    assert q is not None
    assert (q.method, q.checkpoint_format, q.static_input) == ("fp8_per_tensor", "modelopt",
                                                               True)
    assert q.exclude == ("lm_head",)
    flat = quant_from_config({"quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
        "exclude_modules": ["lm_head"]}})
    assert flat is not None and (flat.method, flat.group_size) == ("nvfp4", 16)
    assert vllm_method(flat) == "modelopt_fp4" and vllm_method(q) == "modelopt"


def test_fp8_linears_carry_one_weight_scale_and_one_static_input_scale() -> None:
    # ModelOptFp8LinearMethod: fp8 weight + weight_scale (max over shards) + input_scale, fp32
    got = _tensors(NESTED_FP8)
    assert got["model.layers.*.self_attn.o_proj"] == 4096 * 4096 + 4 + 4
    assert got["model.layers.*.mlp.down_proj"] == 4096 * 14336 + 4 + 4
    assert got["lm_head"] == 128256 * 4096 * 2  # excluded: the model dtype


def test_modelopt_fp8_needs_8_9_and_nvfp4_8_0() -> None:
    over = json.dumps({"quantization_config": NESTED_FP8})
    error, _ = error_and_hint(["estimate", "-m", "llama-3.1-8b", "--gpu", "A100-80GB",
                               "--hf-overrides", over])
    assert error.startswith("error: quantization modelopt needs compute capability 8.9")
    code, _, err = call("estimate", "-m", "llama-3.1-8b", "--gpu", "L40S", "--hf-overrides",
                        over, "--max-model-len", "4096")
    assert code in (0, 1), err
    code, _, err = call("estimate", "-m", "deepseek-r1-nvfp4", "--gpu", "A100-80GB", "-tp", "8",
                        "--max-model-len", "4096")
    assert code in (0, 1), err  # NVFP4 runs on Ampere (ModelOptNvFp4Config: 80)
    error, _ = error_and_hint(["estimate", "-m", "deepseek-r1-nvfp4", "--gpu", "T4", "-tp", "8",
                               "--dtype", "float16"])
    assert error.startswith("error: quantization modelopt_fp4 needs compute capability 8.0")


def test_the_flag_keeps_a_modelopt_checkpoint() -> None:
    code, _, err = call("estimate", "-m", "deepseek-r1-nvfp4", "--gpu", "B200", "-tp", "8",
                        "-q", "modelopt_fp4", "--max-model-len", "4096")
    assert code in (0, 1), err


@pytest.mark.parametrize("algo", ["W4A8_AWQ", ""])
def test_other_algorithms_are_refused(algo: str) -> None:
    with pytest.raises(ConfigError, match="supports FP8 and NVFP4 only"):
        quant_from_config({"quantization_config": {"quant_method": "modelopt",
                                                   "quant_algo": algo}})
