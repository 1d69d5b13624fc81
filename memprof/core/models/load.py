"""Model specs: a HF ``config.json`` normalised into a spec that knows every layer.

memprof reads what the config states (``head_dim``, ``layer_types``, ``quantization_config``,
``compress_ratios``) and derives only what it leaves out. An architecture it does not know, or a
known one missing a field it needs, is a ``ConfigError`` naming the missing piece — never a guess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memprof.base.errors import ConfigError
from memprof.core.models.config import ConfigFields, validate_config
from memprof.core.models.families import FAMILIES, family_of
from memprof.core.models.quant_config import quant_from_config
from memprof.core.models.spec import ModelSpec

# --- where the bundled data lives -------------------------------------------------------------


def configs_dir() -> Path:
    """The bundled ``configs/`` folder (repo checkout or installed wheel)."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / "_bundled_configs", here.parents[3] / "configs"):
        if (candidate / "models").is_dir():
            return candidate
    raise ConfigError(
        "the bundled configs/ folder is missing from this installation",
        hint="reinstall memprof-llm (pip install -e . from a checkout)",
    )


def bundled_models() -> dict[str, Path]:
    """Bundled model name -> path of its config.json copy."""
    return {p.stem: p for p in sorted((configs_dir() / "models").glob("*.json"))}


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



def spec_from_config(
    cfg: dict[str, Any], *, name: str = "model", source: str = "", with_mtp: bool = False
) -> ModelSpec:
    """Normalise a HF config dict into a ``ModelSpec``."""
    validate_config(cfg)
    family, arch = family_of(cfg)
    if "text_config" in cfg and "hidden_size" not in cfg:
        raise ConfigError(
            "multimodal configs (text_config) are not supported yet",
            hint="pass the language model's config.json",
        )
    c = ConfigFields(cfg, family)
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
    builder = FAMILIES[family]
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
