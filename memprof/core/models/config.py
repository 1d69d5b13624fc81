"""Typed validation of a HF ``config.json`` and typed access to its fields."""

from __future__ import annotations

from typing import Any

from memprof.base.errors import ConfigError
from memprof.core.versions import Rule, rule_in_force

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
    # the other keys the engines read for the context length (the two *_length_key_max_len)
    "n_positions": (1, _MAX_LEN), "max_seq_len": (1, _MAX_LEN), "seq_length": (1, _MAX_LEN),
    "model_max_length": (1, _MAX_LEN), "max_target_positions": (1, _MAX_LEN),
    "max_sequence_length": (1, _MAX_LEN), "max_seq_length": (1, _MAX_LEN),
    "seq_len": (1, _MAX_LEN),
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
    for key in ("rope_scaling", "rope_parameters"):
        if isinstance(cfg.get(key), dict):
            _validate_rope(key, cfg[key])
    prf = cfg.get("partial_rotary_factor")  # the rotary share of head_dim (terms/rope_cache.py)
    if prf is not None and not (_is_number(prf) and 0 < prf <= 1):
        raise _bad("partial_rotary_factor", "a number in (0, 1]", prf)


# --- rope_scaling --------------------------------------------------------------------------------
#
# The RoPE types Transformers knows (modeling_rope_utils.py ROPE_INIT_FUNCTIONS: default, linear,
# dynamic, yarn, longrope, llama3), the legacy "su" (= longrope) and "mrope" vLLM accepts
# (vllm/model_executor/layers/rotary_embedding get_rope), DeepSeek's "deepseek_yarn" and
# Gemma 4's "proportional" (vLLM 0.19.0 layers/rotary_embedding/gemma4_rope.py, no factor).
ROPE_TYPES = frozenset({"default", "linear", "dynamic", "yarn", "deepseek_yarn", "longrope",
                        "su", "llama3", "mrope", "proportional"})
_ROPE_NUMBERS = ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow",
                 "mscale", "mscale_all_dim", "attention_factor")
_MAX_ROPE_FACTOR = 1 << 20


def _is_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and value == value and abs(value) != float("inf"))


def _validate_rope(key: str, rope: dict[str, Any]) -> None:
    """``rope_scaling`` checked as the config loads: a known type, numbers where numbers belong.

    Transformers validates it with ``rope_config_validation`` (modeling_rope_utils.py: a known
    ``rope_type``, ``factor`` a float >= 1, yarn's ``original_max_position_embeddings``); vLLM
    reads ``factor`` and yarn's ``original_max_position_embeddings`` to derive the longest
    ``max_model_len`` (vllm/config/model.py ``_get_and_verify_max_len``, v0.11.0).
    """
    if "rope_type" not in rope and "type" not in rope and all(
            isinstance(v, dict) for v in rope.values()) and rope:
        for name, sub in rope.items():  # Transformers v5: one set per layer type
            _validate_rope(f"{key}.{name}", sub)
        return
    kind = rope.get("rope_type", rope.get("type"))
    if not isinstance(kind, str):
        raise _bad(f"{key}.rope_type", "a string naming the RoPE type", kind)
    if kind not in ROPE_TYPES:
        raise ConfigError(f"config.json field '{key}.rope_type' is {kind[:40]!r}, a RoPE type "
                          "neither Transformers nor vLLM knows",
                          hint="one of: " + ", ".join(sorted(ROPE_TYPES)))
    for name in _ROPE_NUMBERS:
        v = rope.get(name)
        if v is None:
            continue
        if not _is_number(v):
            raise _bad(f"{key}.{name}", "a number", v)
        if name == "factor" and not 1 <= v <= _MAX_ROPE_FACTOR:
            raise ConfigError(f"config.json field '{key}.factor' is {v}, outside [1, "
                              f"{_MAX_ROPE_FACTOR:,}]",
                              hint="Transformers' rope_config_validation needs a factor >= 1")
        if v < 0:
            raise ConfigError(f"config.json field '{key}.{name}' is negative ({v})",
                              hint=f"fix '{key}.{name}' in the config.json")
    if kind in ("linear", "dynamic", "yarn", "deepseek_yarn", "longrope", "su", "llama3") and (
            rope.get("factor") is None and kind not in ("longrope", "su")):
        raise ConfigError(f"config.json field '{key}' of type {kind!r} has no 'factor'",
                          hint="Transformers' rope_config_validation requires it; add it")
    omp = rope.get("original_max_position_embeddings")
    if omp is not None:
        _check_int(f"{key}.original_max_position_embeddings", omp, 1, _MAX_LEN)
    elif kind in ("yarn", "deepseek_yarn"):
        raise ConfigError(f"config.json field '{key}' of type {kind!r} has no "
                          "'original_max_position_embeddings'",
                          hint="vLLM derives the longest max_model_len from it "
                          "(config/model.py _get_and_verify_max_len); add it")
    if rope.get("truncate") is not None and not isinstance(rope["truncate"], bool):
        raise _bad(f"{key}.truncate", "true or false", rope["truncate"])


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
    for key in ("group_size", "q_group_size"):
        gs = q.get(key)
        if gs is not None and gs != -1:
            _check_int(f"quantization_config.{key}", gs, 1, _MAX_DIM)
    for key in ("bits", "w_bit"):
        if q.get(key) is not None:
            _check_int(f"quantization_config.{key}", q[key], 1, 16)
    if q.get("desc_act") is not None and not isinstance(q["desc_act"], bool):
        raise _bad("quantization_config.desc_act", "true or false", q["desc_act"])
    for key in ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules"):
        v = q.get(key)
        if v is not None and (not isinstance(v, list) or not all(isinstance(x, str) for x in v)):
            raise _bad(f"quantization_config.{key}", "a list of strings", v)


# --- --hf-overrides -------------------------------------------------------------------------------

MAX_OVERRIDES_CHARS = 1 << 16


def parse_overrides(text: str, flag: str = "--hf-overrides") -> dict[str, Any]:
    """``--hf-overrides`` (SGLang ``--json-model-override-args``) read as the engines read it: a
    JSON object (vLLM EngineArgs ``hf_overrides``: ``json.loads``, v0.11.0 engine/arg_utils.py;
    SGLang ``json.loads(json_model_override_args)``, model_config.py)."""
    import json

    if len(text) > MAX_OVERRIDES_CHARS:
        raise ConfigError(f"{flag} is {len(text):,} characters, more than a config override",
                          hint='e.g. {"num_hidden_layers": 4}')
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"{flag} is not JSON ({text[:40]!r})",
                          hint=f"""e.g. {flag} '{{"num_hidden_layers": 4}}'""") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{flag} must be a JSON object, got {_kind(value)}",
                          hint=f"""e.g. {flag} '{{"num_hidden_layers": 4}}'""")
    return value


# vLLM ``ModelConfig.__post_init__`` peels the dict-valued ``hf_overrides`` off before
# ``get_config`` and applies them after it (``_apply_dict_overrides``): a key whose attribute on
# the loaded config is a sub-config (a ``PretrainedConfig``) is merged into it key by key,
# recursing into dicts (``_update_nested``); any other key is set whole. 0.11.0 and earlier
# ``config.update`` every key, so a dict replaces the key whole.
HF_OVERRIDES_NESTED: tuple[Rule, ...] = (
    Rule(name="hf_overrides_nested", changes="config: --hf-overrides sub-configs",
         since="0.11.1", until=None,
         introduced_by="first seen in 0.11.1 (vllm-project/vllm#25727; 0.11.0 config/model.py "
         "passes every key to config.update)",
         source="0.11.1 / 0.27.1 / 0.33.0 vllm/config/model.py ModelConfig.__post_init__ "
         "(dict_overrides), _apply_dict_overrides, _update_nested", applies_to="hf_overrides"),
)
RULES = (HF_OVERRIDES_NESTED,)

# The keys transformers builds as sub-configs (``PretrainedConfig`` objects) of a composite
# config: the ``sub_configs`` its wrapper configs declare (Qwen2.5-VL, Qwen3-VL, Gemma 3,
# LLaVA, Mllama, Qwen2.5-Omni, InternVL, ...). Other dict-valued keys
# (``rope_scaling``, ``quantization_config``, ``auto_map``) are plain dict attributes.
SUB_CONFIG_KEYS = frozenset({
    "text_config", "vision_config", "audio_config", "thinker_config", "talker_config",
    "llm_config", "language_config"})


def _update_nested(target: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    """``target`` with ``updates`` merged in: a dict value merged into the dict ``target``
    holds under its key, any other set whole (vLLM config/model.py ``_update_nested``)."""
    out = dict(target)
    for key, value in updates.items():
        held = out.get(key)
        if isinstance(value, dict) and isinstance(held, dict):
            out[key] = _update_nested(held, value)
        else:
            out[key] = value
    return out


def merged_sub_configs(cfg: dict[str, Any], text: str, flag: str = "--hf-overrides",
                       release: str | None = None) -> tuple[str, ...]:
    """The keys of the overrides ``text`` that :func:`with_overrides` merges into a sub-config
    of ``cfg`` rather than replacing (none outside :data:`HF_OVERRIDES_NESTED`)."""
    over = parse_overrides(text, flag)
    return tuple(k for k, v in over.items() if _merges(cfg, k, v, flag, release))


def _merges(cfg: dict[str, Any], key: str, value: object, flag: str,
            release: str | None) -> bool:
    return (flag == "--hf-overrides" and key in SUB_CONFIG_KEYS and isinstance(value, dict)
            and isinstance(cfg.get(key), dict)
            and rule_in_force(HF_OVERRIDES_NESTED, release) is not None)


def with_overrides(cfg: dict[str, Any], text: str, flag: str = "--hf-overrides",
                   release: str | None = None) -> dict[str, Any]:
    """``cfg`` with the overrides merged, before validation, as the engine at ``release``
    (``None``: the newest modelled) merges them. ``PretrainedConfig.update`` (vLLM
    transformers_utils/config.py ``get_config``: ``config.update(hf_overrides_kw)``; SGLang
    ``config.update(model_override_args)``): a key given replaces the config's value whole.
    vLLM's ``--hf-overrides`` where :data:`HF_OVERRIDES_NESTED` holds: a dict given for a
    sub-config the config has (:data:`SUB_CONFIG_KEYS`, e.g. ``{"text_config":
    {"max_position_embeddings": 65536}}``) is merged into it; a dict for any other key
    (``rope_scaling``) still replaces it whole. ``update`` sets each key as an attribute, so a
    ``num_labels`` reaches transformers' ``PretrainedConfig.num_labels`` setter, which rebuilds
    ``id2label`` where its length differs: such an ``id2label`` is dropped here (the label count
    is then the override's: memprof/core/models/score_heads.py ``score_labels``)."""
    over = parse_overrides(text, flag)
    out = {**cfg}
    for key, value in over.items():
        out[key] = (_update_nested(cfg[key], value) if _merges(cfg, key, value, flag, release)
                    else value)
    labels, id2label = over.get("num_labels"), out.get("id2label")
    if ("num_labels" in over and "id2label" not in over and isinstance(id2label, dict)
            and len(id2label) != labels):
        out.pop("id2label")
        out.pop("label2id", None)
    return out


# --- the longest context the engines accept -----------------------------------------------------

# vLLM: the smallest of these keys (``model_max_length`` wins when set); vllm/config/model.py
# ``_get_and_verify_max_len`` possible_keys (v0.11.0; vllm/config.py in 0.7-0.9).
_VLLM_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                  "model_max_length", "max_target_positions", "max_sequence_length",
                  "max_seq_length", "seq_len")
# SGLang: the first of these keys that is set; python/sglang/srt/utils/hf_transformers_utils.py
# ``CONTEXT_LENGTH_KEYS`` / ``get_context_length`` (SGL@d315eb7).
_SGLANG_LEN_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                    "max_position_embeddings")


def _rope_sets(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if not isinstance(rope, dict) or not rope:
        return []
    if "rope_type" not in rope and "type" not in rope and all(
            isinstance(v, dict) for v in rope.values()):
        return list(rope.values())
    return [rope]


def _rope_type(rope: dict[str, Any]) -> str:
    return str(rope.get("rope_type", rope.get("type", "default")))


# Set by a family's config view (``Family.config_view``) whose model vLLM exempts from the rope
# factor in the derived context length (``_get_and_verify_max_len`` skips it for model types
# containing the Gemma 3 name, vllm/config/model.py v0.11.0).
ROPE_KEEPS_MAX_LEN = "_rope_scaling_keeps_max_len"


def first_length_key_max_len(cfg: dict[str, Any]) -> tuple[int, str] | None:
    """The first length key present times the RoPE ``factor``, the factor taken as 1 when the
    scaling states ``original_max_position_embeddings`` or is ``llama3``, and how it was derived
    (``None``: no length key). SGLang's rule (``get_context_length``, SGL@d315eb7; a longer
    ``--context-length`` raises unless ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``,
    model_config.py ``ModelConfig``); ``engines/sglang.py`` uses it."""
    key = next((k for k in _SGLANG_LEN_KEYS if cfg.get(k) is not None), None)
    if key is None:
        return None
    factor: float = 1
    rope = cfg.get("rope_scaling")
    if isinstance(rope, dict) and rope:
        factor = rope.get("factor", 1) or 1
        if "original_max_position_embeddings" in rope or _rope_type(rope) == "llama3":
            factor = 1
    how = f"{key} {cfg[key]:,}" + (f" × rope_scaling factor {factor}" if factor != 1 else "")
    return int(factor * cfg[key]), how


def smallest_length_key_max_len(cfg: dict[str, Any]) -> tuple[int, str] | None:
    """The smallest length key (``model_max_length`` when set), then for RoPE scaling other
    than ``su``/``longrope``/``llama3`` (and not on Gemma 3) times ``factor``, yarn starting
    from its ``original_max_position_embeddings``, and how it was derived (``None``: no length
    key). vLLM's rule (``_get_and_verify_max_len``, vllm/config/model.py v0.11.0; a longer
    ``--max-model-len`` raises unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``);
    ``engines/vllm.py`` uses it."""
    sets = _rope_sets(cfg)
    found = [(cfg[k], k) for k in _VLLM_LEN_KEYS if cfg.get(k) is not None]
    if not found:
        return None
    length, key = min(found)
    if cfg.get("model_max_length") is not None:
        length, key = cfg["model_max_length"], "model_max_length"
    derived: float = length
    how = f"{key} {length:,}"
    if sets and not cfg.get(ROPE_KEEPS_MAX_LEN):
        factor = 1.0
        for rope in sets:
            kind = _rope_type(rope)
            if kind not in ("su", "longrope", "llama3"):
                factor = rope.get("factor", factor)
                if kind == "yarn":
                    derived = rope["original_max_position_embeddings"]
                    how = f"yarn original_max_position_embeddings {derived:,}"
        derived *= factor
        if factor != 1:
            how += f" × rope factor {factor:g}"
    return int(derived), how


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

    def size(self, key: str, default: int | None = None) -> int:
        """A size or count the architecture needs: present (or ``default``, HF's own) and >= 1."""
        value = self.num(key, default)
        if value < 1:
            raise ConfigError(
                f"config.json field {key!r} is {value}, but this {self.family} model needs it "
                "to be at least 1",
                hint=f"fix {key!r} in the config.json (memprof refuses rather than reinterpret "
                "the architecture)")
        return value

    def opt_int(self, key: str) -> int | None:
        return None if self.cfg.get(key) is None else self.num(key)

    def flag(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        return bool(value) if value is not None else default


# Architectures memprof knows, by config ``model_type`` (and ``architectures`` as a fallback).
