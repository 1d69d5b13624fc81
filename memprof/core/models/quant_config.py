"""The quantisation a checkpoint declares (``quantization_config``) or ``--quantization`` asks
for, as vLLM reads them."""

from __future__ import annotations

from typing import Any

from memprof.base.errors import ConfigError
from memprof.core.models.spec import ModelSpec, QuantConfig

# --- quantisation --------------------------------------------------------------------------------

QUANT_METHODS = ("none", "fp8", "fp8_per_channel", "mxfp4", "nvfp4", "awq", "gptq")
_FLAG_ALIASES = {
    "modelopt_fp4": "nvfp4",
    "nvfp4": "nvfp4",
    "modelopt": "fp8_per_channel",
    "fp8": "fp8",
    "mxfp4": "mxfp4",
    "awq": "awq",
    "awq_marlin": "awq",
    "gptq": "gptq",
    "gptq_marlin": "gptq",
    "none": "none",
}


def quant_from_config(cfg: dict[str, Any]) -> QuantConfig | None:
    """Read ``quantization_config`` as vLLM reads it (method, block/group, excluded modules)."""
    q = cfg.get("quantization_config")
    if not q:
        return None
    if not isinstance(q, dict):
        raise ConfigError("quantization_config must be an object", hint="fix config.json")
    method = str(q.get("quant_method", "")).lower()
    exclude = tuple(
        str(p)
        for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules")
        for p in (q.get(key) or [])
    )
    if method == "fp8":
        block = q.get("weight_block_size")
        return QuantConfig(
            method="fp8" if block else "fp8_per_tensor",
            block=(int(block[0]), int(block[1])) if block else None,
            exclude=exclude, expert_dtype=cfg.get("expert_dtype"),
        )
    if method == "mxfp4":
        return QuantConfig(method="mxfp4", group_size=32, bits=4, exclude=exclude)
    if method in ("awq", "gptq"):
        # vLLM reads both with get_from_keys, which raises when none of the keys is there
        # (model_executor/layers/quantization/awq.py AWQConfig.from_config: ["w_bit", "bits"],
        # ["q_group_size", "group_size"]; gptq.py GPTQConfig.from_config: ["bits"],
        # ["group_size"], v0.11.0): a checkpoint without them is refused, not given 4/128
        bits_keys = ("w_bit", "bits") if method == "awq" else ("bits",)
        group_keys = ("q_group_size", "group_size") if method == "awq" else ("group_size",)
        bits = next((q[k] for k in bits_keys if q.get(k) is not None), None)
        group = next((q[k] for k in group_keys if q.get(k) is not None), None)
        for keys, value in ((bits_keys, bits), (group_keys, group)):
            if value is None:
                raise ConfigError(
                    f"quantization_config ({method}) has no {' or '.join(map(repr, keys))}",
                    hint=f"vLLM's {method.upper()} config requires it; use the checkpoint's "
                    "own config.json")
        assert bits is not None and group is not None
        return QuantConfig(method=method, group_size=int(group), bits=int(bits),
                           exclude=exclude,
                           desc_act=bool(q.get("desc_act", False)))
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if "FP4" in algo:
            return QuantConfig(method="nvfp4", group_size=int(q.get("group_size", 16)), bits=4,
                               exclude=exclude)
        if "FP8" in algo:
            return QuantConfig(method="fp8_per_tensor", exclude=exclude)
    raise ConfigError(
        f"memprof does not know the quantization method {method!r}",
        hint="known: fp8 (block or per-tensor), mxfp4, modelopt (nvfp4/fp8), awq, gptq; "
        "or override with --quantization",
    )


def quant_from_flag(flag: str, spec: ModelSpec) -> QuantConfig | None:
    """``--quantization`` as vLLM takes it.

    A method the checkpoint already declares keeps the checkpoint's details. On an unquantised
    config, ``fp8`` is vLLM's online dynamic per-tensor fp8; the weight-only methods are sized as
    the usual checkpoints of that method ship (awq/gptq 4-bit, group 128; nvfp4 group 16; mxfp4
    group 32), with embeddings, lm_head and routers left in the model dtype.
    """
    method = _FLAG_ALIASES.get(flag.lower())
    if method is None:
        raise ConfigError(
            f"unknown --quantization {flag!r}",
            hint="one of: " + ", ".join(sorted(_FLAG_ALIASES)),
        )
    if method == "none":
        return None
    if spec.quant is not None and spec.quant.method.startswith(method):
        return spec.quant
    if spec.quant is not None:
        raise ConfigError(
            f"the checkpoint is already quantised with {spec.quant.method}; "
            f"--quantization {flag} does not match it",
            hint="drop --quantization, or point --model at the other checkpoint's config.json",
        )
    if method == "fp8":
        return QuantConfig(method="fp8_per_tensor", source="flag")
    if method == "fp8_per_channel":
        return QuantConfig(method="fp8_per_channel", source="flag")
    if method in ("awq", "gptq"):
        return QuantConfig(method=method, group_size=128, bits=4, source="flag")
    if method == "nvfp4":
        return QuantConfig(method="nvfp4", group_size=16, bits=4, source="flag")
    return QuantConfig(method="mxfp4", group_size=32, bits=4, source="flag")
