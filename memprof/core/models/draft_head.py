"""An EAGLE / EAGLE-3 draft head's ``config.json`` read as vLLM reads it (``DraftHead``).

The head is named by ``--speculative-model`` (``--speculative-config``'s ``model``): a bundled
config, an HF id of one, a ``config.json`` or a folder holding one, as ``--model`` is read
(``memprof.core.models.load.load_config``). What vLLM does with it, read in the 0.30.0, 0.31.0
and 0.33.0 wheels:

- config/speculative.py ``SpeculativeConfig.__post_init__`` wraps a plain HF config in
  transformers_utils/configs/eagle.py ``EAGLEConfig``, which renames its architecture:
  ``method`` eagle, ``LlamaForCausalLM`` → ``EagleLlamaForCausalLM``; eagle3, any name that
  neither starts nor ends with "Eagle3" gets the prefix (``LlamaForCausalLM`` →
  ``Eagle3LlamaForCausalLM``, ``Qwen3ForCausalLM`` → ``Eagle3Qwen3ForCausalLM``);
- a speculators-format config (``speculators_model_type``; transformers_utils/configs/
  speculators/base.py ``extract_transformers_pre_trained_config``) is its
  ``transformer_layer_config`` with the algorithm's fields on top (algos.py ``update_eagle3``:
  ``draft_vocab_size``, ``target_hidden_size``, ``norm_before_residual`` (default true),
  ``norm_before_fc``, ``fc_norm``, and the architecture by ``model_type``: its family's
  ``eagle3_speculators`` (``Eagle3Qwen3ForCausalLM``, ``Eagle3LlamaForCausalLM``, the default);
- model_executor/models/registry.py maps the name to the class that builds it: llama_eagle.py
  ``EagleLlamaForCausalLM``, llama_eagle3.py ``Eagle3LlamaForCausalLM`` (also for
  ``LlamaForCausalLMEagle3``, ``Eagle3MiniMaxM2ForCausalLM``, ``Eagle3Qwen2_5vlForCausalLM``,
  ``Eagle3Qwen3vlForCausalLM``), qwen3_eagle3.py ``Eagle3Qwen3ForCausalLM``. The other draft
  classes (DeepSeek, Llama 4, MiniCPM, Mistral, Cohere heads, P-EAGLE) are refused by name.

The head's own fields: llama_eagle3.py ``LlamaModel.__init__`` takes the fc's input as
``target_hidden_size`` (default ``hidden_size``) × ``num_aux_hidden_states`` (the config's, else
the length of ``eagle_config["eagle_aux_hidden_state_layer_ids"]``, else 3), only where
``eagle_config["use_aux_hidden_state"]`` is not false; ``norm_before_fc`` from ``eagle_config``
or the config; ``fc_norm``; ``Eagle3LlamaForCausalLM`` sets ``draft_vocab_size`` to
``vocab_size`` where the config gives none. A head quantised by its own
``quantization_config`` (``get_draft_quant_config``) is refused: memprof sizes heads in the
model dtype only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from memprof.base.errors import BadInput, ConfigError
from memprof.core.models.families import ROWS
from memprof.core.models.load import load_config
from memprof.core.models.spec import DraftHead

EAGLE = "eagle"
EAGLE3 = "eagle3"

# model_executor/models/registry.py (0.30.0 – 0.33.0): the draft classes memprof sizes, by the
# architecture name vLLM asks the registry for
HEAD_CLASSES: dict[str, str] = {
    "EagleLlamaForCausalLM": "EagleLlamaForCausalLM",
    "Eagle3LlamaForCausalLM": "Eagle3LlamaForCausalLM",
    "LlamaForCausalLMEagle3": "Eagle3LlamaForCausalLM",
    "Eagle3MiniMaxM2ForCausalLM": "Eagle3LlamaForCausalLM",
    "Eagle3Qwen2_5vlForCausalLM": "Eagle3LlamaForCausalLM",
    "Eagle3Qwen3vlForCausalLM": "Eagle3LlamaForCausalLM",
    "Eagle3Qwen3ForCausalLM": "Eagle3Qwen3ForCausalLM",
}
# speculators algos.py update_eagle3: a transformer_layer_config without a model_type is read
# as Llama's (``pre_trained_config.get("model_type", "llama")``); the other model types map to
# their family's class (``Family.eagle3_speculators``)
SPECULATORS_DEFAULT_CLASS = "Eagle3LlamaForCausalLM"

_HINT = ("--speculative-model names the head's config.json (a folder holding it, the file, or "
         "a bundled name); memprof sizes vLLM's Llama and Qwen3 EAGLE / EAGLE-3 heads")


def renamed(arch: str, method: str) -> str:
    """The architecture vLLM asks its registry for (transformers_utils/configs/eagle.py
    ``EAGLEConfig``)."""
    if method == EAGLE:
        return arch if arch.startswith("Eagle") else f"Eagle{arch}"
    return arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"


def _speculators_class(model_type: object, where: str) -> str:
    """The class vLLM builds for a speculators EAGLE-3 head of ``model_type`` (None: the
    default's), or :class:`ConfigError` where vLLM has none."""
    if model_type is None:
        return SPECULATORS_DEFAULT_CLASS
    classes = {t: c for row in ROWS for t, c in row.eagle3_speculators}
    if str(model_type) not in classes:
        raise ConfigError(f"{where}: vLLM has no EAGLE-3 speculator of model_type "
                          f"{str(model_type)[:40]!r}", hint="model types "
                          + ", ".join(sorted(classes)) + " (speculators algos.py update_eagle3)")
    return classes[str(model_type)]


def _int(cfg: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    """``cfg[key]`` (``default`` where it is absent or null), a positive integer."""
    value = cfg.get(key)
    if value is None:
        if default is None:
            raise ConfigError(f"{where} has no {key}", hint=_HINT)
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where}: {key} is {value!r}, not a positive integer", hint=_HINT)
    return value


def head_from_config(cfg: dict[str, Any], method: str, *, name: str = "head",
                     source: str = "") -> DraftHead:
    """The head ``cfg`` (its ``config.json``) describes under ``method`` (eagle / eagle3), or
    :class:`ConfigError` naming what memprof does not size."""
    where = f"the draft head {name}"
    if method not in (EAGLE, EAGLE3):
        raise BadInput(f"{where}: speculative method {method!r} has no draft head memprof "
                       "sizes", hint="eagle or eagle3")
    if "speculators_model_type" in cfg:
        kind = cfg.get("speculators_model_type")
        layer = cfg.get("transformer_layer_config")
        if kind != EAGLE3 or method != EAGLE3 or not isinstance(layer, dict):
            raise ConfigError(f"{where}: a speculators config of type {str(kind)[:40]!r} "
                              f"under method {method}", hint="memprof reads speculators "
                              "EAGLE-3 configs (speculators_model_type eagle3, with a "
                              "transformer_layer_config) under method eagle3")
        speculators_class = _speculators_class(layer.get("model_type"), where)
        body = {**layer, "draft_vocab_size": cfg.get("draft_vocab_size"),
                "norm_before_residual": cfg.get("norm_before_residual", True),
                "norm_before_fc": cfg.get("norm_before_fc", False),
                "fc_norm": cfg.get("fc_norm", False)}
        if cfg.get("target_hidden_size") is not None:
            body["target_hidden_size"] = cfg["target_hidden_size"]
        archs = [speculators_class]
        quantised = "quantization_config" in cfg or "quantization_config" in layer
    else:
        body = cfg
        archs = [renamed(str(a), method) for a in (cfg.get("architectures") or [])]
        quantised = "quantization_config" in cfg
    if not archs:
        raise ConfigError(f"{where} names no architecture", hint=_HINT)
    arch = archs[0]
    cls = HEAD_CLASSES.get(arch)
    if cls is None or (method == EAGLE) != (cls == "EagleLlamaForCausalLM"):
        raise ConfigError(f"{where}: memprof does not size the vLLM draft class {arch[:60]} "
                          f"under method {method}", hint="memprof sizes "
                          + ", ".join(sorted(set(HEAD_CLASSES.values()))))
    if quantised:
        raise ConfigError(f"{where} is quantised (quantization_config): memprof does not "
                          "size quantised draft heads", hint="a head in the model dtype "
                          "(bfloat16 / float16) is sized")
    hidden = _int(body, "hidden_size", where)
    heads = _int(body, "num_attention_heads", where)
    vocab = _int(body, "vocab_size", where)
    eagle_config = body.get("eagle_config") or {}
    if not isinstance(eagle_config, dict):
        raise ConfigError(f"{where}: eagle_config is not an object", hint=_HINT)
    fc_inputs = 0
    if cls != "EagleLlamaForCausalLM" and eagle_config.get("use_aux_hidden_state", True):
        aux = body.get("num_aux_hidden_states")
        if aux is None:
            ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")
            aux = len(ids) if isinstance(ids, list) and ids else 3
        fc_inputs = _int({"num_aux_hidden_states": aux}, "num_aux_hidden_states", where)
    return DraftHead(
        name=name, source=str(cfg.get("_source", source)), method=method, architecture=cls,
        hidden_size=hidden, num_layers=_int(body, "num_hidden_layers", where),
        num_heads=heads, num_kv_heads=_int(body, "num_key_value_heads", where, heads),
        head_dim=_int(body, "head_dim", where, hidden // heads),
        intermediate_size=_int(body, "intermediate_size", where),
        vocab_size=vocab,
        draft_vocab_size=_int(body, "draft_vocab_size", where, vocab),
        target_hidden_size=_int(body, "target_hidden_size", where, hidden),
        fc_inputs=fc_inputs,
        norm_before_fc=bool(eagle_config.get("norm_before_fc",
                                              body.get("norm_before_fc", False))),
        fc_norm=bool(body.get("fc_norm", False)),
        norm_before_residual=bool(body.get("norm_before_residual", False)),
        qk_norm=cls == "Eagle3Qwen3ForCausalLM",
        attention_bias=bool(body.get("attention_bias", False)))


@lru_cache(maxsize=64)
def load_draft_head(model: str, method: str) -> DraftHead:
    """The head ``--speculative-model`` names (``model``), read under ``method``; a head that
    cannot be read is one ``error:`` naming the flag."""
    try:
        name, cfg, path = load_config(model)
    except ConfigError as exc:
        raise ConfigError(f"--speculative-model: {exc.message}", hint=_HINT) from None
    return head_from_config(cfg, method, name=name, source=str(path))
