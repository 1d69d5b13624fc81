"""Model specs: a HF ``config.json`` normalised into a spec that knows every layer.

memprof reads what the config states (``head_dim``, ``layer_types``, ``quantization_config``,
``compress_ratios``) and derives only what it leaves out. An architecture it does not know, or a
known one missing a field it needs, is a ``ConfigError`` naming the missing piece — never a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memprof.base.errors import ConfigError

# --- where the bundled data lives -------------------------------------------------------------


def configs_dir() -> Path:
    """The bundled ``configs/`` folder (repo checkout or installed wheel)."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[1] / "_bundled_configs", here.parents[2] / "configs"):
        if (candidate / "models").is_dir():
            return candidate
    raise ConfigError(
        "the bundled configs/ folder is missing from this installation",
        hint="reinstall memprof-llm (pip install -e . from a checkout)",
    )


def bundled_models() -> dict[str, Path]:
    """Bundled model name -> path of its config.json copy."""
    return {p.stem: p for p in sorted((configs_dir() / "models").glob("*.json"))}


# --- the spec ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Attention:
    """One layer's attention, with every size the weights and the KV cache need.

    ``kind`` is ``gqa`` (MHA/GQA/MQA with per-head K and V), ``mla`` (DeepSeek V2/V3 latent) or
    ``dsv4`` (DeepSeek-V4 compressed sparse attention).
    """

    kind: str
    num_heads: int
    num_kv_heads: int
    head_dim: int  # query/key head size (GQA); MLA: qk_nope + qk_rope; DSv4: 512
    v_head_dim: int
    sliding_window: int | None = None
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    sinks: bool = False
    # MLA
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    # DeepSeek-V3.2 / V4 lightning indexer
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # DeepSeek-V4
    compress_ratio: int = 0  # 0 = SWA-only, 4 = C4 (CSA, with indexer), 128 = C128 (HCA)
    o_groups: int = 0
    o_lora_rank: int = 0

    @property
    def has_indexer(self) -> bool:
        return self.index_n_heads > 0 and (self.kind == "mla" or self.compress_ratio == 4)


@dataclass(frozen=True, slots=True, kw_only=True)
class MLP:
    """One layer's feed-forward block: ``dense`` or ``moe``."""

    kind: str
    intermediate_size: int = 0  # dense MLP
    num_experts: int = 0
    top_k: int = 0
    moe_intermediate_size: int = 0
    shared_intermediate_size: int = 0  # 0 = no shared expert
    shared_expert_gate: bool = False  # Qwen2-MoE style sigmoid gate on the shared expert
    router_bias: bool = False
    expert_bias: bool = False  # gpt-oss: biases on w13 / w2
    e_score_correction_bias: bool = False  # DeepSeek noaux_tc
    hash_routed: bool = False  # DeepSeek-V4 hash layers: tid2eid table, no gate bias
    mlp_bias: bool = False
    activation: str = "silu"


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    index: int
    attention: Attention
    mlp: MLP
    is_mtp: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantConfig:
    """What the checkpoint's ``quantization_config`` (or ``--quantization``) says."""

    method: str  # fp8, mxfp4, nvfp4, awq, gptq, fp8_per_channel, none
    block: tuple[int, int] | None = None  # fp8 block (128, 128)
    group_size: int = 0  # awq / gptq / nvfp4 / mxfp4 group
    bits: int = 0
    exclude: tuple[str, ...] = ()  # HF module-name patterns left unquantised
    expert_dtype: str | None = None  # DeepSeek-V4: "fp4" experts under an fp8 config
    desc_act: bool = False
    source: str = "config"  # config | flag


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    name: str
    family: str  # llama, qwen2, qwen3, qwen3_moe, gpt_oss, deepseek_v3, deepseek_v32, deepseek_v4
    architecture: str
    hidden_size: int
    vocab_size: int
    tie_word_embeddings: bool
    dtype: str  # torch_dtype of the checkpoint: bfloat16 / float16 / float32
    max_position_embeddings: int | None  # None: the config states none (--max-model-len needed)
    layers: tuple[Layer, ...]
    mtp_layers: tuple[Layer, ...] = ()
    quant: QuantConfig | None = None
    hc_mult: int = 0  # DeepSeek-V4 hyper-connections
    num_hash_layers: int = 0
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def is_moe(self) -> bool:
        return any(layer.mlp.kind == "moe" for layer in self.layers)

    @property
    def num_experts(self) -> int:
        return max((layer.mlp.num_experts for layer in self.layers), default=0)


def layer_kinds(layers: tuple[Layer, ...] | list[Layer]) -> list[tuple[Layer, int]]:
    """Layers grouped by kind (attention, MLP, MTP role): (first layer of the kind, count), in
    order of first appearance. Work that depends only on a layer's kind loops over these, so it
    grows with the kinds, not the count (builders share one Attention/MLP object per kind, so
    the identity check answers almost every layer without hashing the dataclasses)."""
    by_id: dict[tuple[int, int, bool], list[object]] = {}
    kinds: dict[tuple[object, ...], list[object]] = {}
    for layer in layers:
        ik = (id(layer.attention), id(layer.mlp), layer.is_mtp)
        entry = by_id.get(ik)
        if entry is None:
            key = (layer.attention, layer.mlp, layer.is_mtp)
            entry = kinds.get(key)
            if entry is None:
                entry = kinds[key] = [layer, 0]
            by_id[ik] = entry
        entry[1] += 1  # type: ignore[operator]
    return [(e[0], e[1]) for e in kinds.values()]  # type: ignore[misc]


# --- loading -------------------------------------------------------------------------------------


def hf_ids() -> dict[str, tuple[str, str]]:
    """HF repo id (lower case) → (the id as written, bundled name), from each bundled config's
    ``_hf_ids``."""
    out: dict[str, tuple[str, str]] = {}
    for name, path in bundled_models().items():
        try:
            ids = json.loads(path.read_text(encoding="utf-8")).get("_hf_ids") or []
        except (OSError, ValueError):
            continue
        for i in ids:
            out[str(i).lower()] = (str(i), name)
    return out


_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_MODEL_ARG = 4096  # characters: longer than any path this machine can open


def resolve_config_path(model: str) -> Path:
    """A bundled name (case-insensitive), an HF repo id of a bundled model
    (``Qwen/Qwen3-32B``), a path to a config.json, or a folder holding one."""
    if len(model) > MAX_MODEL_ARG or "\x00" in model:
        raise ConfigError(f"--model is not a name, a path or an HF repo id ({len(model)} "
                          "characters)", hint="memprof models lists the bundled names")
    bundled = bundled_models()
    key = model.strip().lower()
    if key in bundled:
        return bundled[key]
    try:
        return _config_file(model)
    except OSError as exc:
        raise ConfigError(f"cannot use --model {model[:80]!r}: {exc.strerror}",
                          hint="pass a bundled name, an HF repo id, a config.json or a folder "
                          "holding one") from None


def _config_file(model: str) -> Path:
    bundled = bundled_models()
    key = model.strip().lower()
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise ConfigError(
                f"no config.json in the folder {model}",
                hint="point --model at a HF model folder, a config.json, or a bundled name "
                "(memprof models lists them)",
            )
        return path
    if path.is_file():
        return path
    if _HF_ID.match(model.strip()) and not model.endswith(".json"):
        found = hf_ids().get(key)
        if found is not None:
            return bundled[found[1]]
        known = ", ".join(sorted(i for i, _n in hf_ids().values()))
        raise ConfigError(
            f"{model!r} is not a bundled model and there is no such local folder (memprof "
            "downloads nothing)",
            hint=f"bundled: {known}; or pass a local model folder or its config.json")
    if "/" in model or model.endswith(".json"):
        raise ConfigError(
            f"no such file: {model[:200]}",
            hint="check the path, or use a bundled name (memprof models)")
    close = [n for n in bundled if key.split("-")[0] in n]
    raise ConfigError(
        f"unknown model {model[:80]!r}",
        hint=("did you mean " + ", ".join(close) + "? " if close else "")
        + "memprof models lists the bundled names; --model also takes an HF repo id of a "
        "bundled model, a local folder or a config.json",
    )


def load_config(model: str) -> tuple[str, dict[str, Any], Path]:
    path = resolve_config_path(model)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror}", hint="check the file's permissions"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text", hint="pass a HF config.json") from None
    if not text.strip():
        raise ConfigError(f"{path} is empty", hint="pass the model's HF config.json")
    try:
        cfg = json.loads(text)
    except RecursionError:
        raise ConfigError(f"{path} nests JSON too deeply to be a config",
                          hint="pass the model's HF config.json") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            hint="pass the model's HF config.json",
        ) from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} holds no JSON object", hint="pass the model's HF config.json")
    name = path.stem if path.parent.name == "models" else (path.parent.name or path.stem)
    return name, cfg, path


def load_model(model: str, *, speculative_mtp: bool = False) -> ModelSpec:
    """Load and normalise a model. ``speculative_mtp`` adds the MTP layer(s) the config declares."""
    name, cfg, path = load_config(model)
    return spec_from_config(cfg, name=name, source=str(path), with_mtp=speculative_mtp)


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


class _Cfg:
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
_FAMILY_BY_MODEL_TYPE = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "qwen2_moe": "qwen2_moe",
    "gpt_oss": "gpt_oss",
    "deepseek_v2": "deepseek_v3",
    "deepseek_v3": "deepseek_v3",
    "kimi_k2": "deepseek_v3",
    "deepseek_v32": "deepseek_v32",
    "deepseek_v4": "deepseek_v4",
}
_FAMILY_BY_ARCH = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "GptOssForCausalLM": "gpt_oss",
    "DeepseekV2ForCausalLM": "deepseek_v3",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "DeepseekV4ForCausalLM": "deepseek_v4",
}


def known_model_types() -> list[str]:
    return sorted(_FAMILY_BY_MODEL_TYPE)


def _family(cfg: dict[str, Any]) -> tuple[str, str]:
    archs = cfg.get("architectures") or []
    arch = archs[0] if isinstance(archs, list) and archs else str(cfg.get("model_type", "?"))
    model_type = cfg.get("model_type")
    if not archs and model_type is None:
        raise ConfigError(
            "the config names no architecture (no 'architectures' and no 'model_type')",
            hint="pass the model's HF config.json",
        )
    if model_type in _FAMILY_BY_MODEL_TYPE:
        return _FAMILY_BY_MODEL_TYPE[str(model_type)], arch
    if arch in _FAMILY_BY_ARCH:
        return _FAMILY_BY_ARCH[arch], arch
    raise ConfigError(
        f"memprof does not know the architecture {arch!r} (model_type {model_type!r})",
        hint="known model_type values: " + ", ".join(known_model_types()),
    )


def spec_from_config(
    cfg: dict[str, Any], *, name: str = "model", source: str = "", with_mtp: bool = False
) -> ModelSpec:
    """Normalise a HF config dict into a ``ModelSpec``."""
    validate_config(cfg)
    family, arch = _family(cfg)
    if "text_config" in cfg and "hidden_size" not in cfg:
        raise ConfigError(
            "multimodal configs (text_config) are not supported yet",
            hint="pass the language model's config.json",
        )
    c = _Cfg(cfg, family)
    hidden = c.num("hidden_size")
    n_layers = c.num("num_hidden_layers")
    vocab = c.num("vocab_size")
    if hidden == 0 or n_layers == 0 or vocab == 0:
        raise ConfigError(
            "hidden_size, num_hidden_layers and vocab_size must be positive", hint="fix config.json"
        )
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    if dtype not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"unsupported torch_dtype {dtype!r}", hint="bfloat16, float16, float32")
    builder = {
        "llama": _dense_layers,
        "qwen2": _dense_layers,
        "qwen3": _dense_layers,
        "qwen3_moe": _qwen_moe_layers,
        "qwen2_moe": _qwen_moe_layers,
        "gpt_oss": _gpt_oss_layers,
        "deepseek_v3": _deepseek_v3_layers,
        "deepseek_v32": _deepseek_v3_layers,
        "deepseek_v4": _deepseek_v4_layers,
    }[family]
    layers, mtp = builder(c, hidden, n_layers)
    return ModelSpec(
        name=name,
        family=family,
        architecture=arch,
        hidden_size=hidden,
        vocab_size=vocab,
        tie_word_embeddings=c.flag("tie_word_embeddings", False),
        dtype=dtype,
        max_position_embeddings=c.opt_int("max_position_embeddings"),
        layers=tuple(layers),
        mtp_layers=tuple(mtp) if with_mtp else (),
        quant=quant_from_config(cfg),
        hc_mult=c.num("hc_mult", 0) if family == "deepseek_v4" else 0,
        num_hash_layers=c.num("num_hash_layers", 0) if family == "deepseek_v4" else 0,
        source=str(cfg.get("_source", source)),
        raw=cfg,
    )


def _head_dim(c: _Cfg, hidden: int, heads: int) -> int:
    """``head_dim`` as stated (Qwen3: 128, not hidden/heads); derived only when absent."""
    stated = c.opt_int("head_dim")
    if stated:
        return stated
    if hidden % heads:
        raise ConfigError(
            f"config.json has no head_dim and hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {heads}",
            hint="add head_dim to the config",
        )
    return hidden // heads


def _gqa(c: _Cfg, hidden: int, *, bias: bool, qk_norm: bool, window: int | None = None,
         sinks: bool = False, o_bias: bool = False) -> Attention:
    heads = c.num("num_attention_heads")
    kv = c.num("num_key_value_heads", heads)
    if heads == 0 or kv == 0 or heads % kv:
        raise ConfigError(
            f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}",
            hint="fix the config.json",
        )
    hd = _head_dim(c, hidden, heads)
    return Attention(kind="gqa", num_heads=heads, num_kv_heads=kv, head_dim=hd, v_head_dim=hd,
                     qkv_bias=bias, o_bias=o_bias, qk_norm=qk_norm, sliding_window=window,
                     sinks=sinks)


def _sliding_windows(c: _Cfg, n_layers: int) -> list[int | None]:
    """Per-layer sliding window from ``layer_types`` / ``use_sliding_window`` (Qwen2/3 style)."""
    types = c.cfg.get("layer_types")
    window = c.opt_int("sliding_window")
    if isinstance(types, list):
        if len(types) < n_layers:
            raise ConfigError(
                f"layer_types lists {len(types)} layers but num_hidden_layers is {n_layers}",
                hint="fix the config.json",
            )
        out: list[int | None] = []
        for t in types[:n_layers]:
            if t == "sliding_attention":
                if not window:
                    raise ConfigError(
                        "layer_types has sliding_attention but sliding_window is missing",
                        hint="add sliding_window to the config",
                    )
                out.append(window)
            elif t == "full_attention":
                out.append(None)
            else:
                raise ConfigError(f"unknown layer type {t!r} in layer_types", hint="")
        return out
    if c.flag("use_sliding_window", False) and window:
        # Qwen2: layers >= max_window_layers use SWA (HF Qwen2Attention).
        first = c.num("max_window_layers", n_layers)
        return [window if i >= first else None for i in range(n_layers)]
    return [None] * n_layers


def _dense_layers(c: _Cfg, hidden: int, n_layers: int) -> tuple[list[Layer], list[Layer]]:
    fam = c.family
    bias = fam == "qwen2" or c.flag("attention_bias", False)
    windows = _sliding_windows(c, n_layers)
    mlp = MLP(kind="dense", intermediate_size=c.num("intermediate_size"),
              mlp_bias=c.flag("mlp_bias", False), activation=str(c.cfg.get("hidden_act", "silu")))
    attn = {w: _gqa(c, hidden, bias=bias, qk_norm=fam == "qwen3", window=w)
            for w in set(windows)}
    layers = [Layer(index=i, attention=attn[windows[i]], mlp=mlp) for i in range(n_layers)]
    return layers, []


def _qwen_moe_layers(c: _Cfg, hidden: int, n_layers: int) -> tuple[list[Layer], list[Layer]]:
    qwen3 = c.family == "qwen3_moe"
    attn = _gqa(c, hidden, bias=not qwen3 or c.flag("attention_bias", False), qk_norm=qwen3)
    n_exp = c.num("num_experts")
    step = c.num("decoder_sparse_step", 1) or 1
    dense_only = set(c.cfg.get("mlp_only_layers") or [])
    shared = 0 if qwen3 else c.num("shared_expert_intermediate_size", 0)
    moe = MLP(kind="moe", num_experts=n_exp, top_k=c.num("num_experts_per_tok"),
              moe_intermediate_size=c.num("moe_intermediate_size"),
              shared_intermediate_size=shared, shared_expert_gate=shared > 0)
    layers = []
    for i in range(n_layers):
        is_moe = n_exp > 0 and i not in dense_only and (i + 1) % step == 0
        mlp = moe if is_moe else MLP(kind="dense", intermediate_size=c.num("intermediate_size"))
        layers.append(Layer(index=i, attention=attn, mlp=mlp))
    return layers, []


def _gpt_oss_layers(c: _Cfg, hidden: int, n_layers: int) -> tuple[list[Layer], list[Layer]]:
    windows = _sliding_windows(c, n_layers)
    attn = {w: _gqa(c, hidden, bias=True, o_bias=True, qk_norm=False, window=w, sinks=True)
            for w in set(windows)}
    n_exp = c.num("num_local_experts")
    moe = MLP(kind="moe", num_experts=n_exp,
              top_k=c.num("num_experts_per_tok", c.num("experts_per_token", 0)),
              moe_intermediate_size=c.num("intermediate_size"), router_bias=True,
              expert_bias=True, activation="swigluoai")
    layers = [
        Layer(index=i, attention=attn[windows[i]], mlp=moe) for i in range(n_layers)
    ]
    return layers, []


def _deepseek_v3_layers(c: _Cfg, hidden: int, n_layers: int) -> tuple[list[Layer], list[Layer]]:
    heads = c.num("num_attention_heads")
    nope, rope = c.num("qk_nope_head_dim"), c.num("qk_rope_head_dim")
    sparse = c.family == "deepseek_v32"
    attn = Attention(
        kind="mla", num_heads=heads, num_kv_heads=1, head_dim=nope + rope,
        v_head_dim=c.num("v_head_dim"), q_lora_rank=c.opt_int("q_lora_rank") or None,
        kv_lora_rank=c.num("kv_lora_rank"), qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        index_n_heads=c.num("index_n_heads") if sparse else 0,
        index_head_dim=c.num("index_head_dim") if sparse else 0,
        index_topk=c.num("index_topk") if sparse else 0,
    )
    n_routed = c.num("n_routed_experts", 0)
    first_dense = c.num("first_k_dense_replace", 0)
    freq = c.num("moe_layer_freq", 1) or 1
    moe_i = c.num("moe_intermediate_size") if n_routed else 0
    moe = MLP(kind="moe", num_experts=n_routed, top_k=c.num("num_experts_per_tok", 0),
              moe_intermediate_size=moe_i,
              shared_intermediate_size=moe_i * c.num("n_shared_experts", 0),
              e_score_correction_bias=c.cfg.get("topk_method") == "noaux_tc")
    dense = MLP(kind="dense", intermediate_size=c.num("intermediate_size"))
    layers = [
        Layer(index=i, attention=attn,
              mlp=moe if n_routed and i >= first_dense and i % freq == 0 else dense)
        for i in range(n_layers)
    ]
    mtp = [Layer(index=n_layers + k, attention=attn, mlp=moe if n_routed else dense, is_mtp=True)
           for k in range(c.num("num_nextn_predict_layers", 0))]
    return layers, mtp


def _deepseek_v4_layers(c: _Cfg, hidden: int, n_layers: int) -> tuple[list[Layer], list[Layer]]:
    """DeepSeek-V4: per-layer ``compress_ratios`` (L+1 entries, the last for the MTP block).

    Layer types and sizes follow ``reference/deepseek_v4.md`` §1-§3 (checkpoint-verified).
    """
    ratios = c.cfg.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n_layers:
        raise ConfigError(
            "DeepSeek-V4 config needs compress_ratios with one entry per layer",
            hint="use the model's original config.json",
        )
    for key in ("o_groups", "o_lora_rank", "q_lora_rank", "index_n_heads", "index_head_dim",
                "sliding_window", "hc_mult", "head_dim"):
        c.num(key)
    heads = c.num("num_attention_heads")
    n_hash = c.num("num_hash_layers", 0)

    def attn(ratio: int) -> Attention:
        if ratio not in (0, 1, 4, 128):
            raise ConfigError(f"unknown DeepSeek-V4 compress ratio {ratio}", hint="0, 4 or 128")
        return Attention(
            kind="dsv4", num_heads=heads, num_kv_heads=1, head_dim=c.num("head_dim"),
            v_head_dim=c.num("head_dim"), q_lora_rank=c.num("q_lora_rank"),
            qk_rope_head_dim=c.num("qk_rope_head_dim"), sliding_window=c.num("sliding_window"),
            compress_ratio=0 if ratio <= 1 else ratio, o_groups=c.num("o_groups"),
            o_lora_rank=c.num("o_lora_rank"), sinks=True,
            index_n_heads=c.num("index_n_heads"), index_head_dim=c.num("index_head_dim"),
            index_topk=c.num("index_topk"),
        )

    moe_i = c.num("moe_intermediate_size")

    def mlp(hash_routed: bool) -> MLP:
        return MLP(kind="moe", num_experts=c.num("n_routed_experts"),
                   top_k=c.num("num_experts_per_tok"), moe_intermediate_size=moe_i,
                   shared_intermediate_size=moe_i * c.num("n_shared_experts", 0),
                   e_score_correction_bias=not hash_routed, hash_routed=hash_routed)

    attns = {r: attn(int(r)) for r in set(ratios[:n_layers])}
    mlps = {h: mlp(h) for h in (True, False)}
    layers = [Layer(index=i, attention=attns[ratios[i]], mlp=mlps[i < n_hash])
              for i in range(n_layers)]
    mtp = [Layer(index=n_layers + k, attention=attn(0), mlp=mlp(False), is_mtp=True)
           for k in range(c.num("num_nextn_predict_layers", 0))]
    return layers, mtp


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
        return QuantConfig(method=method, group_size=int(q.get("group_size") or 128),
                           bits=int(q.get("bits") or q.get("w_bit") or 4), exclude=exclude,
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
