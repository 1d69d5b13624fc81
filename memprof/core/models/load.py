"""Model specs: a HF ``config.json`` normalised into a spec that knows every layer.

memprof reads what the config states (``head_dim``, ``layer_types``, ``quantization_config``,
``compress_ratios``) and derives only what it leaves out. An architecture it does not know, or a
known one missing a field it needs, is a ``ConfigError`` naming the missing piece — never a guess.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from memprof.base.errors import BadInput, ConfigError
from memprof.base.files import path_kind, read_capped_text
from memprof.core.models.config import ConfigFields, validate_config
from memprof.core.models.families import family_of, family_row
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
    return dict(_bundled_files(configs_dir()))


@lru_cache(maxsize=4)
def _bundled_files(configs: Path) -> tuple[tuple[str, Path], ...]:
    """The bundled configs of ``configs``, listed once a process (the folder is part of the
    installation; every model lookup asks for the list)."""
    return tuple((p.stem, p) for p in sorted((configs / "models").glob("*.json")))


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


# The largest config.json memprof reads: the biggest HF configs (multimodal ones with long
# layer lists) are ~100 KiB; 16 MiB is far above any real one and bounds the read.
MAX_CONFIG_BYTES = 16 << 20

_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_MODEL_ARG = 4096  # characters: longer than any path this machine can open


def resolve_config_path(model: str) -> Path:
    """A bundled name (case-insensitive), an HF repo id of a bundled model
    (``Qwen/Qwen3-32B``), a path to a config.json, or a folder holding one."""
    if len(model) > MAX_MODEL_ARG or "\x00" in model:
        raise ConfigError(f"--model is not a name, a path or an HF repo id ({len(model)} "
                          "characters)", hint="memprof models lists the bundled names")
    if not model.strip():  # an unset shell variable (--model "$MODEL"), never this folder
        raise ConfigError("--model is empty", hint="give a bundled name (memprof models lists "
                          "them), an HF repo id of a bundled model, a config.json or a folder "
                          "holding one")
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
    if path_kind(path) == "folder":
        path = path / "config.json"
        if path_kind(path) in ("missing", "folder"):
            raise ConfigError(
                f"no config.json in the folder {model}",
                hint="point --model at a HF model folder, a config.json, or a bundled name "
                "(memprof models lists them)",
            )
        return path  # load_config reads it (a FIFO or a device there is refused)
    if path_kind(path) != "missing":
        return path
    if _HF_ID.match(model.strip()) and not model.endswith(".json"):
        found = hf_ids().get(key)
        if found is not None:
            return bundled[found[1]]
        close = suggest_models(model)
        known = ", ".join(sorted(i for i, _n in hf_ids().values()))
        raise ConfigError(
            f"{model[:80]!r} is not a bundled model and there is no such local folder (memprof "
            "downloads nothing)",
            hint=(f"did you mean {' or '.join(close)}? " if close else f"bundled: {known}; ")
            + "or pass a local model folder or its config.json")
    if "/" in model or model.endswith(".json"):
        raise ConfigError(
            f"no such file: {model[:200]}",
            hint="check the path, or use a bundled name (memprof models)")
    close = suggest_models(model)
    raise ConfigError(
        f"unknown model {model[:80]!r}",
        hint=("did you mean " + " or ".join(close) + "? " if close else "")
        + "memprof models lists the bundled names; --model also takes an HF repo id of a "
        "bundled model, a local folder or a config.json",
    )


def _norm_model(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum() or ch == ".")


def suggest_models(model: str, limit: int = 3) -> list[str]:
    """Bundled names (for a name) or bundled HF ids (for an ``org/name`` id) close to
    ``model``: the same name spelt with other case, dashes, underscores or spaces, names of the
    same family (``llama-9`` → the Llama models), and close spellings (difflib)."""
    import difflib  # only for an unknown model: kept off the cold start

    if len(model) > 200:
        return []
    text = model.strip()
    ids = hf_ids()
    if "/" in text:  # an HF id: compare ids, then the repo name alone with the bundled names
        pool = {_norm_model(written): written for written, _n in ids.values()}
        names = {_norm_model(written.rsplit("/", 1)[-1]): written for written, _n in
                 ids.values()}
        key = _norm_model(text)
        repo = _norm_model(text.rsplit("/", 1)[-1])
        # an id the typed one extends or shortens (Qwen/Qwen3-32B for Qwen/Qwen3-32B-Instruct)
        # first, longest first: a suffix shared by many ids must not crowd it out
        out = [pool[k] for k in sorted(pool, key=len, reverse=True)
               if len(k) > len(key) // 2 and (key.startswith(k) or k.startswith(key))]
        out += [pool[k] for k in difflib.get_close_matches(key, list(pool), n=limit,
                                                           cutoff=0.75)]
        out += [names[k] for k in difflib.get_close_matches(repo, list(names), n=limit,
                                                             cutoff=0.75)]
        return list(dict.fromkeys(out))[:limit]
    bundled = {_norm_model(n): n for n in bundled_models()}
    bundled.update({_norm_model(w.rsplit("/", 1)[-1]): n for w, n in ids.values()})
    key = _norm_model(text)
    out = [bundled[key]] if key in bundled else []
    family = re.match(r"[a-z]+[0-9]*(?:\.[0-9]+)?", text.lower())
    if family and len(family.group(0)) >= 3:  # llama-9 → llama…, qwen3-14b → qwen3…
        out += [n for n in bundled_models() if n.startswith(family.group(0))]
    out += [bundled[k] for k in difflib.get_close_matches(key, list(bundled), n=limit,
                                                          cutoff=0.75)]
    exact = out[:1] if key in bundled else []

    def likeness(name: str) -> float:
        return difflib.SequenceMatcher(None, key, _norm_model(name)).ratio()

    rest = sorted(dict.fromkeys(n for n in out if n not in exact), key=likeness, reverse=True)
    return [*exact, *rest][:limit]


def load_config(model: str) -> tuple[str, dict[str, Any], Path]:
    path = resolve_config_path(model)
    try:
        text = read_capped_text(path, what="the model config", cap=MAX_CONFIG_BYTES,
                                hint="pass the model's HF config.json (memprof reads up to "
                                "16 MiB of it)")
    except BadInput as exc:
        raise ConfigError(exc.message, hint=exc.hint) from None
    if not text.strip():
        raise ConfigError(f"{path} is empty", hint="pass the model's HF config.json")
    try:
        cfg = json.loads(text)
    except (RecursionError, MemoryError):
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


def load_model(model: str, *, speculative_mtp: bool = False,
               assume_architecture: str | None = None) -> ModelSpec:
    """Load and normalise a model. ``speculative_mtp`` adds the MTP layer(s) the config declares;
    ``assume_architecture`` reads an unknown architecture as that generic family."""
    name, cfg, path = load_config(model)
    return _interned(spec_from_config(cfg, name=name, source=str(path), with_mtp=speculative_mtp,
                                      assume_architecture=assume_architecture))


def _interned(spec: ModelSpec) -> ModelSpec:
    """The first loaded spec equal to ``spec`` and read from the same config (``raw``, which
    the spec's comparison leaves out), else ``spec`` itself: the estimator's value caches are
    keyed by specs, and a key that is the same object is found without comparing the spec
    field by field (equal but distinct specs of one model, loaded again and again in one
    process, cost a deep comparison at every lookup)."""
    first = _first_equal(spec)
    return first if first.raw == spec.raw else spec


@lru_cache(maxsize=256)
def _first_equal(spec: ModelSpec) -> ModelSpec:
    return spec



def spec_from_config(
    cfg: dict[str, Any], *, name: str = "model", source: str = "", with_mtp: bool = False,
    assume_architecture: str | None = None,
) -> ModelSpec:
    """Normalise a HF config dict into a ``ModelSpec``."""
    validate_config(cfg)
    family, arch = family_of(cfg, assume_architecture)
    row = family_row(family)
    whole = cfg
    if row.config_view is not None:  # e.g. a wrapper's text_config, read as its family reads it
        cfg = row.config_view(cfg)
        validate_config(cfg)
    elif "text_config" in cfg and "hidden_size" not in cfg:
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
    layers, mtp = row.build(c, hidden, n_layers)
    extras = row.spec_extras(c) if row.spec_extras else {}
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
        quant=quant_from_config(cfg, row.weight_prefixes),
        hc_mult=extras.get("hc_mult", 0),
        num_hash_layers=extras.get("num_hash_layers", 0),
        vision=row.vision(whole, hidden) if row.vision is not None else None,
        source=str(cfg.get("_source", source)),
        raw=cfg,
    )
