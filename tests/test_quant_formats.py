"""compressed-tensors checkpoints (``quant_method: compressed-tensors``) read as vLLM v0.11.0
reads them, and the bytes of each modelled scheme from the tensors its scheme allocates
(memprof.core.models.quant_config, memprof.core.weights.formats)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from memprof.base.errors import ConfigError
from memprof.cli import run
from memprof.core.models.quant_config import quant_from_config
from memprof.core.models.spec import QuantConfig
from memprof.core.weights.formats import linear_bytes, linear_params

ROOT = Path(__file__).resolve().parents[1]

# The FP8 W8A8 static per-tensor checkpoint the Transformers compressed-tensors guide quotes from
# nm-testing/Meta-Llama-3.1-8B-Instruct-FP8-hf config.json
# (https://huggingface.co/nm-testing/Meta-Llama-3.1-8B-Instruct-FP8-hf/blob/main/config.json;
# transformers docs/source/en/quantization/compressed_tensors.md); omitted keys take
# compressed-tensors' QuantizationArgs defaults (symmetric, not dynamic)
FP8_STATIC = {
    "config_groups": {"group_0": {
        "input_activations": {"num_bits": 8, "strategy": "tensor", "type": "float"},
        "targets": ["Linear"],
        "weights": {"num_bits": 8, "strategy": "tensor", "type": "float"}}},
    "format": "naive-quantized",
    "ignore": ["lm_head"],
    "quant_method": "compressed-tensors",
    "quantization_status": "frozen",
}

# W4A16 group-128 symmetric, every key as llm-compressor writes a W4A16 preset
W4A16 = {
    "config_groups": {"group_0": {
        "input_activations": None, "output_activations": None, "targets": ["Linear"],
        "weights": {"actorder": None, "block_structure": None, "dynamic": False,
                    "group_size": 128, "num_bits": 4, "observer": "minmax",
                    "observer_kwargs": {}, "strategy": "group", "symmetric": True,
                    "type": "int"}}},
    "format": "pack-quantized", "ignore": ["lm_head"], "kv_cache_scheme": None,
    "quant_method": "compressed-tensors", "quantization_status": "compressed",
}


def _ct(weights: dict[str, Any], inputs: dict[str, Any] | None, fmt: str) -> dict[str, Any]:
    return {"quantization_config": {
        "quant_method": "compressed-tensors", "format": fmt, "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                      "input_activations": inputs}}}}


def _q(weights: dict[str, Any], inputs: dict[str, Any] | None, fmt: str) -> QuantConfig:
    q = quant_from_config(_ct(weights, inputs, fmt))
    assert q is not None
    return q


def _check(q: QuantConfig, out: int, inn: int, expected: int) -> None:
    n, _formula = linear_bytes(out, inn, q, 2)
    assert n == expected
    assert sum(p.bytes for p in linear_params(out, inn, q, "bfloat16")) == expected


def invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


# --- parsing ------------------------------------------------------------------------------------


def test_the_published_fp8_static_config_is_per_tensor_with_a_static_input_scale() -> None:
    q = quant_from_config({"quantization_config": FP8_STATIC})
    assert q is not None
    assert (q.method, q.static_input, q.checkpoint_format, q.exclude) == (
        "fp8_per_tensor", True, "compressed-tensors", ("lm_head",))
    # fp8 e4m3 weight, one fp32 weight scale after requantize_with_max_scale, one fp32 input
    # scale after .max() (CompressedTensorsW8A8Fp8.process_weights_after_loading)
    _check(q, 4096, 4096, 4096 * 4096 + 4 + 4)


def test_w4a16_group_128_is_packed_int32_with_a_scale_per_group() -> None:
    q = quant_from_config({"quantization_config": W4A16})
    assert q is not None
    assert (q.method, q.bits, q.group_size, q.zero_point, q.desc_act) == (
        "wna16", 4, 128, False, False)
    # weight_packed 4096 × 4096/8 int32 + weight_scale 4096 × 32 bf16 + weight_shape 2 int64
    _check(q, 4096, 4096, 4096 * 512 * 4 + 4096 * 32 * 2 + 16)


def test_asymmetric_act_order_w4a16_adds_zero_points_g_idx_and_sort_indices() -> None:
    q = _q({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
            "symmetric": False, "actorder": "group"}, None, "pack-quantized")
    assert q.zero_point and q.desc_act
    base = 4096 * 512 * 4 + 4096 * 32 * 2 + 16
    # weight_zero_point (4096/8) × 32 int32; weight_g_idx + g_idx_sort_indices 4096 int32 each
    _check(q, 4096, 4096, base + 512 * 32 * 4 + 2 * 4096 * 4)


def test_w8a16_channel_has_one_scale_column() -> None:
    q = _q({"num_bits": 8, "type": "int", "strategy": "channel"}, None, "pack-quantized")
    assert (q.method, q.bits, q.group_size) == ("wna16", 8, -1)
    # 1024 × 4096/4 int32 + 1024 × 1 bf16 + 16
    _check(q, 1024, 4096, 1024 * 1024 * 4 + 1024 * 2 + 16)


@pytest.mark.parametrize("strategy", ["tensor", "channel"])
def test_fp8_dynamic_per_token_inputs(strategy: str) -> None:
    q = _q({"num_bits": 8, "type": "float", "strategy": strategy, "symmetric": True},
           {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
           "float-quantized")
    assert not q.static_input
    scales = 4 if strategy == "tensor" else 4 * 6144
    _check(q, 6144, 4096, 6144 * 4096 + scales)


def test_fp8_block_is_the_fp8_block_layout() -> None:
    q = _q({"num_bits": 8, "type": "float", "strategy": "block",
            "block_structure": [128, 128]},
           {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128,
            "dynamic": True}, "float-quantized")
    assert (q.method, q.block) == ("fp8", (128, 128))
    # fp32 weight_scale of ceil(6144/128) × ceil(4096/128) (create_fp8_scale_parameter)
    _check(q, 6144, 4096, 6144 * 4096 + 4 * 48 * 32)


def test_w8a8_int8_dynamic_symmetric_and_static_asymmetric() -> None:
    dyn = _q({"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
             {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True,
              "symmetric": True}, "int-quantized")
    assert (dyn.method, dyn.static_input) == ("int8_w8a8", False)
    _check(dyn, 6144, 4096, 6144 * 4096 + 4 * 6144)
    static = _q({"num_bits": 8, "type": "int", "strategy": "tensor", "symmetric": True},
                {"num_bits": 8, "type": "int", "strategy": "tensor", "dynamic": False,
                 "symmetric": False}, "int-quantized")
    assert static.static_input and not static.input_symmetric
    # int8 weight + fp32 scale per channel + fp32 input scale + int32 input zero point
    # + int32 azp_adj per output channel (kernels/scaled_mm/cutlass.py)
    _check(static, 6144, 4096, 6144 * 4096 + 4 * 6144 + 4 + 4 + 4 * 6144)


def test_nvfp4_w4a4_is_sized_as_nvfp4() -> None:
    grp = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
           "symmetric": True}
    q = _q({**grp, "dynamic": False}, {**grp, "dynamic": "local"}, "nvfp4-pack-quantized")
    assert (q.method, q.group_size) == ("nvfp4", 16)
    # 4096 × 4096 / 2 packed e2m1 + 4096 × 256 fp8 scales (already 128 × 4 aligned) + 3 fp32
    _check(q, 4096, 4096, 4096 * 2048 + 4096 * 256 + 12)


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("weights", "inputs", "fmt", "needle"), [
    ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128},
     {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}, "int-quantized",
     "W4 int group / A8 int token"),
    ({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32}, None,
     "mxfp4-pack-quantized", "mxfp4-pack-quantized"),
    ({"num_bits": 8, "type": "float", "strategy": "channel"}, None, "float-quantized",
     "W8 float channel / A16"),
    ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}, None,
     "marlin-24", "marlin-24"),
])
def test_unmodelled_schemes_are_refused_by_name(weights: dict[str, Any],
                                                inputs: dict[str, Any] | None, fmt: str,
                                                needle: str) -> None:
    with pytest.raises(ConfigError, match="compressed-tensors") as e:
        quant_from_config(_ct(weights, inputs, fmt))
    assert needle in str(e.value)


def test_a_group_targeting_some_layers_only_is_refused() -> None:
    cfg = copy.deepcopy(W4A16)
    cfg["config_groups"]["group_0"]["targets"] = ["re:.*self_attn.*"]
    with pytest.raises(ConfigError, match="not every Linear"):
        quant_from_config({"quantization_config": cfg})


def test_several_schemes_are_refused() -> None:
    cfg = copy.deepcopy(W4A16)
    cfg["config_groups"]["group_1"] = {
        "targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}
    with pytest.raises(ConfigError, match="several schemes"):
        quant_from_config({"quantization_config": cfg})


def test_cli_refuses_a_bad_config_group_and_the_flag_on_an_unquantised_model(
        tmp_path: Path) -> None:
    cfg = json.loads((ROOT / "configs/models/llama-3.1-8b.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for argv in (["estimate", "--model", str(path), "--gpu", "H100"],
                 ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100",
                  "--quantization", "compressed-tensors"]):
        code, out, err = invoke(argv)
        lines = err.strip().splitlines()
        assert code == 2 and out == "", (argv, err)
        assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith(
            "hint: ")


def test_a_w4a16_llama_estimates_with_the_packed_tensors(tmp_path: Path) -> None:
    cfg = json.loads((ROOT / "configs/models/llama-3.1-8b.json").read_text())
    cfg["quantization_config"] = W4A16
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for argv in (["estimate", "--model", str(path), "--gpu", "H100", "-f", "json"],
                 ["estimate", "--model", str(path), "--gpu", "H100", "-f", "json",
                  "--quantization", "compressed-tensors"]):
        code, out, err = invoke(argv)
        assert code == 0, err
        rank = json.loads(out)["ranks"][0]
        each = {t["module"]: t["bytes_each"] for t in rank["tensors"]}
        # o_proj 4096 × 4096 at W4 g128: 8 MiB packed + 4096 × 32 bf16 scales + 16 B shape
        assert each["model.layers.*.self_attn.o_proj"] == 4096 * 4096 // 2 + 4096 * 32 * 2 + 16
        # lm_head is in the ignore list: 128256 × 4096 bf16
        assert any(t["bytes_each"] == 128256 * 4096 * 2 and "lm_head" in t["module"]
                   for t in rank["tensors"])


def test_regex_ignore_entries_leave_the_matching_layers_unquantised(tmp_path: Path) -> None:
    cfg = json.loads((ROOT / "configs/models/llama-3.1-8b.json").read_text())
    cfg["quantization_config"] = {**W4A16, "ignore": ["lm_head", "re:.*o_proj$"]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = invoke(["estimate", "--model", str(path), "--gpu", "H100", "-f", "json"])
    assert code == 0, err
    each = {t["module"]: t["bytes_each"] for t in json.loads(out)["ranks"][0]["tensors"]}
    assert each["model.layers.*.self_attn.o_proj"] == 4096 * 4096 * 2  # bf16, as ignored
    assert each["model.layers.*.mlp.down_proj"] == 4096 * 14336 // 2 + 4096 * 112 * 2 + 16
    bad = {**W4A16, "ignore": ["re:(unclosed"]}
    with pytest.raises(ConfigError, match="not a regular expression"):
        quant_from_config({"quantization_config": bad})


# --- AWQ / GPTQ kernels ------------------------------------------------------------------------

# a GPTQ config with the keys AutoGPTQ's BaseQuantizeConfig writes (bits, group_size,
# damp_percent, desc_act, sym, true_sequential) and quant_method
GPTQ = {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "sym": True,
        "true_sequential": True, "quant_method": "gptq"}
W4G128 = 4096 * 4096 // 2 + 32 * 4096 * 2  # qweight + bf16 scales of a 4096 × 4096 linear
ZEROS = 32 * 4096 // 2  # int32 qzeros (32 groups × 4096/8)


def _gptq(**kw: Any) -> QuantConfig:
    q = quant_from_config({"quantization_config": {**GPTQ, **kw}})
    assert q is not None
    return q


@pytest.mark.parametrize(("kw", "arch", "expected"), [
    ({}, "sm90", W4G128),  # gptq_marlin: qzeros emptied (symmetric)
    ({"desc_act": True}, "sm90", W4G128 + 2 * 4096 * 4),  # g_idx + g_idx_sort_indices
    ({}, "sm75", W4G128 + ZEROS),  # below sm80 Marlin has no types: plain gptq keeps qzeros
    ({}, "gfx942", W4G128 + ZEROS),  # not CUDA
    ({"desc_act": True}, "sm75", W4G128 + ZEROS + 4096 * 4),  # argsorted g_idx only
    ({"sym": False}, "sm90", W4G128 + ZEROS),  # (4, False) not in gptq_marlin's TYPE_MAP
    ({"sym": None}, "sm90", W4G128 + ZEROS),  # unstated sym: not marlin-compatible
    ({"group_size": 256}, "sm90", 4096 * 4096 // 2 + 16 * 4096 * 2 + 16 * 4096 // 2),
])
def test_gptq_bytes_follow_the_kernel_vllm_picks(kw: dict[str, Any], arch: str,
                                                 expected: int) -> None:
    q = _gptq(**kw)
    n, _formula = linear_bytes(4096, 4096, q, 2, arch)
    assert n == expected
    assert sum(p.bytes for p in linear_params(4096, 4096, q, "bfloat16", arch)) == expected


def test_awq_keeps_its_zero_points_on_every_kernel() -> None:
    q = quant_from_config({"quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
        "version": "gemm"}})
    assert q is not None and q.zero_point
    for arch in ("sm90", "sm75", "gfx942"):
        assert linear_bytes(4096, 4096, q, 2, arch)[0] == W4G128 + ZEROS


def test_explicit_gptq_flag_forces_the_plain_kernel(tmp_path: Path) -> None:
    """Up to 0.21.0 ("forcing gptq"); from 0.22.0 one AutoGPTQConfig serves gptq and
    gptq_marlin alike (memprof/core/models/quant_config.py GPTQ_FLAG_FORCES_PLAIN)."""
    cfg = json.loads((ROOT / "configs/models/llama-3.1-8b.json").read_text())
    cfg["quantization_config"] = GPTQ
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for release, plain in (("0.21.0", W4G128 + ZEROS), ("0.22.0", W4G128)):
        o_proj = {}
        for flag in ("gptq_marlin", "gptq"):
            code, out, err = invoke(["estimate", "--model", str(path), "--gpu", "H100", "-f",
                                     "json", "--quantization", flag, "--engine-version", release])
            assert code == 0, err
            each = {t["module"]: t["bytes_each"] for t in json.loads(out)["ranks"][0]["tensors"]}
            o_proj[flag] = each["model.layers.*.self_attn.o_proj"]
        assert o_proj == {"gptq_marlin": W4G128, "gptq": plain}, release


# --- bitsandbytes 4-bit ------------------------------------------------------------------------

# the quantization_config Transformers' BitsAndBytesConfig.to_dict writes for a 4-bit nf4
# double-quant checkpoint (the shape of the unsloth "*-bnb-4bit" configs)
BNB4 = {"_load_in_4bit": True, "_load_in_8bit": False, "bnb_4bit_compute_dtype": "bfloat16",
        "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True, "llm_int8_enable_fp32_cpu_offload": False,
        "llm_int8_has_fp16_weight": False, "llm_int8_skip_modules": None,
        "llm_int8_threshold": 6.0, "load_in_4bit": True, "load_in_8bit": False,
        "quant_method": "bitsandbytes"}


def test_bnb4_double_quant_and_plain_absmax() -> None:
    q = quant_from_config({"quantization_config": BNB4})
    assert q is not None and (q.method, q.group_size, q.double_quant) == ("bnb4", 64, True)
    n = 4096 * 4096
    blocks = n // 64
    # 4-bit weight + uint8 absmax per 64 + fp32 nested absmax per 256 absmax + 256-entry fp32
    # nested map + fp32 offset + 16-entry fp32 quant map
    _check(q, 4096, 4096, n // 2 + blocks + 4 * (blocks // 256) + 1024 + 4 + 64)
    plain = quant_from_config({"quantization_config": {**BNB4, "bnb_4bit_use_double_quant": False,
                                                       "llm_int8_skip_modules": ["mlp"]}})
    assert plain is not None and not plain.double_quant and "mlp" in plain.exclude
    _check(plain, 4096, 4096, n // 2 + 4 * blocks + 64)


def test_bnb_8bit_is_refused() -> None:
    with pytest.raises(ConfigError, match="8-bit"):
        quant_from_config({"quantization_config": {**BNB4, "load_in_8bit": True,
                                                   "load_in_4bit": False}})


def test_compressed_tensors_fp8_below_sm89_is_weight_only_marlin() -> None:
    q = quant_from_config({"quantization_config": FP8_STATIC})
    assert q is not None
    # A100 (sm80): fp8 weight repacked at the same bytes + bf16 scale per output channel
    # + the static fp32 input scale (CompressedTensorsW8A16Fp8 / prepare_fp8_layer_for_marlin)
    for arch, expected in (("sm80", 6144 * 4096 + 6144 * 2 + 4),
                           ("sm89", 6144 * 4096 + 4 + 4), ("sm90", 6144 * 4096 + 4 + 4)):
        assert linear_bytes(6144, 4096, q, 2, arch)[0] == expected
        assert sum(p.bytes for p in linear_params(6144, 4096, q, "bfloat16", arch)) == expected
