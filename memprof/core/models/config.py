"""Typed validation of a HF ``config.json`` and typed access to its fields."""

from __future__ import annotations

from typing import Any

from memprof.base.errors import ConfigError

# --- typed validation of config.json ------------------------------------------------------------
#
# Every field memprof reads, with its type and range, checked once at load: a config with a wrong
# type anywhere, a size of zero where one is needed, or an absurd magnitude is one ConfigError
# naming the field, never a crash inside a term. The upper bounds sit far above any released
# model and far below what would make the arithmetic slow.

_MAX_DIM = 1 << 24  # hidden, intermediate, head sizes, vocabulary
_MAX_LAYERS = 1_000_000
_MAX_COUNT = 1 << 16  # heads, experts, groups
_MAX_LEN = 1 << 32  # positions, windows
_INT_FIELDS: dict[str, tuple[int, int]] = {
    # field: (smallest, largest)
    "hidden_size": (1, _MAX_DIM), "num_hidden_layers": (1, _MAX_LAYERS),
    "vocab_size": (1, _MAX_DIM), "num_attention_heads": (1, _MAX_COUNT),
    "num_key_value_heads": (1, _MAX_COUNT), "head_dim": (1, _MAX_DIM),
    "intermediate_size": (0, _MAX_DIM), "max_position_embeddings": (1, _MAX_LEN),
    "num_experts": (0, _MAX_COUNT), "num_local_experts": (0, _MAX_COUNT),
    "n_routed_experts": (0, _MAX_COUNT), "num_experts_per_tok": (0, _MAX_COUNT),
    "experts_per_token": (0, _MAX_COUNT), "moe_intermediate_size": (0, _MAX_DIM),
    "shared_expert_intermediate_size": (0, _MAX_DIM), "decoder_sparse_step": (0, _MAX_LAYERS),
    "max_window_layers": (0, _MAX_LAYERS), "sliding_window": (0, _MAX_LEN),
    "q_lora_rank": (0, _MAX_DIM), "kv_lora_rank": (0, _MAX_DIM),
    "qk_nope_head_dim": (0, _MAX_DIM), "qk_rope_head_dim": (0, _MAX_DIM),
    "v_head_dim": (0, _MAX_DIM), "index_n_heads": (0, _MAX_COUNT),
    "index_head_dim": (0, _MAX_DIM), "index_topk": (0, _MAX_LEN),
    "first_k_dense_replace": (0, _MAX_LAYERS), "moe_layer_freq": (0, _MAX_LAYERS),
    "n_shared_experts": (0, _MAX_COUNT), "num_nextn_predict_layers": (0, 64),
    "o_groups": (1, _MAX_COUNT), "o_lora_rank": (0, _MAX_DIM), "hc_mult": (0, 64),
    "num_hash_layers": (0, _MAX_LAYERS),
}
_BOOL_FIELDS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window")
_STR_FIELDS = ("model_type", "torch_dtype", "dtype", "hidden_act", "topk_method",
               "expert_dtype")
_INT_LIST_FIELDS = ("compress_ratios", "mlp_only_layers")
_STR_LIST_FIELDS = ("architectures", "layer_types")


def _kind(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _bad(field: str, what: str, value: object) -> ConfigError:
    shown = repr(value) if len(repr(value)) <= 40 else _kind(value)
    return ConfigError(f"config.json field {field!r} must be {what}, got {shown}",
                       hint=f"fix {field!r} in the config.json (memprof reads it to size the "
                       "model)")


def _check_int(field: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, "an integer", value)
    if not low <= value <= high:
        shown = f"{value:,}" if len(str(value)) <= 24 else f"a {len(str(abs(value)))}-digit number"
        raise ConfigError(f"config.json field {field!r} is {shown}, outside [{low:,}, {high:,}]",
                          hint=f"fix {field!r} in the config.json")


def validate_config(cfg: dict[str, Any]) -> None:
    """Check the type and range of every key memprof reads (``null`` counts as absent)."""
    for key, (low, high) in _INT_FIELDS.items():
        if cfg.get(key) is not None:
            _check_int(key, cfg[key], low, high)
    for key in _BOOL_FIELDS:
        if cfg.get(key) is not None and not isinstance(cfg[key], bool):
            raise _bad(key, "true or false", cfg[key])
    for key in _STR_FIELDS:
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise _bad(key, "a string", cfg[key])
    for key in _STR_LIST_FIELDS:
        v = cfg.get(key)
        if v is not None and (not isinstance(v, list) or not all(isinstance(x, str) for x in v)):
            raise _bad(key, "a list of strings", v)
    for key in _INT_LIST_FIELDS:
        v = cfg.get(key)
        if v is None:
            continue
        if not isinstance(v, list) or len(v) > _MAX_LAYERS + 64:
            raise _bad(key, "a list of integers", v)
        for x in v:
            _check_int(key, x, 0, _MAX_LAYERS)
    q = cfg.get("quantization_config")
    if q is not None:
        _validate_quant(q)
    for key in ("text_config", "rope_scaling"):
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise _bad(key, "an object", cfg[key])


def _validate_quant(q: object) -> None:
    if not isinstance(q, dict):
        raise _bad("quantization_config", "an object", q)
    for key in ("quant_method", "quant_algo"):
        if q.get(key) is not None and not isinstance(q[key], str):
            raise _bad(f"quantization_config.{key}", "a string", q[key])
    block = q.get("weight_block_size")
    if block is not None:
        if not isinstance(block, list) or len(block) != 2:
            raise _bad("quantization_config.weight_block_size", "a list of two integers", block)
        for x in block:
            _check_int("quantization_config.weight_block_size", x, 1, _MAX_DIM)
    if q.get("group_size") is not None:
        gs = q["group_size"]
        if gs != -1:
            _check_int("quantization_config.group_size", gs, 1, _MAX_DIM)
    for key in ("bits", "w_bit"):
        if q.get(key) is not None:
            _check_int(f"quantization_config.{key}", q[key], 1, 16)
    if q.get("desc_act") is not None and not isinstance(q["desc_act"], bool):
        raise _bad("quantization_config.desc_act", "true or false", q["desc_act"])
    for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules"):
        v = q.get(key)
        if v is not None and (not isinstance(v, list) or not all(isinstance(x, str) for x in v)):
            raise _bad(f"quantization_config.{key}", "a list of strings", v)


class ConfigFields:
    """Typed access to config fields that fails with the name of what is missing."""

    def __init__(self, cfg: dict[str, Any], family: str) -> None:
        self.cfg = cfg
        self.family = family

    def num(self, key: str, default: int | None = None) -> int:
        value = self.cfg.get(key)
        if value is None:
            if default is not None:
                return default
            raise ConfigError(
                f"config.json of this {self.family} model has no {key!r}",
                hint=f"memprof needs {key!r} to size this architecture; add it to the config",
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"config.json field {key!r} must be an integer, got {value!r}",
                hint="fix the config.json",
            )
        if value < 0:
            raise ConfigError(f"config.json field {key!r} is negative ({value})", hint="fix it")
        return value

    def opt_int(self, key: str) -> int | None:
        return None if self.cfg.get(key) is None else self.num(key)

    def flag(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        return bool(value) if value is not None else default


# Architectures memprof knows, by config ``model_type`` (and ``architectures`` as a fallback).
