"""The families memprof knows: one row (``row.Family``) per family, in one module per family
(``llama``, ``qwen``, ``qwen_moe``, ``gpt_oss``, ``deepseek_v3``, ``deepseek_v4``,
``mixtral``, ``phi3``, ``glm4_moe``, ``minimax_m2``, ``gemma``, ``gemma4``, ``llama4``,
``qwen3_next``, ``nemotron_h``, ``granite_hybrid``, ``kimi_linear``, ``qwen_vl`` and ``qwen3_5``
(multimodal);
``dense_decoder`` only when a user opts in), found by the config's ``model_type`` (or
``architectures``). A new family is one module here and one entry in ``ROWS``; generic modules
ask ``family_row(spec.family)`` instead of naming it."""

from __future__ import annotations

from typing import Any

from memprof.base.errors import ConfigError
from memprof.core.models.encoder_only import refuse_encoder_only
from memprof.core.models.families import (
    deepseek_v3,
    deepseek_v4,
    dense_decoder,
    gemma,
    gemma4,
    glm4_moe,
    gpt_oss,
    granite_hybrid,
    kimi_linear,
    llama,
    llama4,
    minimax_m2,
    mixtral,
    nemotron_h,
    phi3,
    qwen,
    qwen3_5,
    qwen3_next,
    qwen_moe,
    qwen_vl,
)
from memprof.core.models.families.row import Built, Family, LayerBuilder
from memprof.core.models.score_heads import refuse_score_head, seq_cls_base

ROWS: tuple[Family, ...] = (
    llama.FAMILY, qwen.QWEN2, qwen.QWEN3, qwen_moe.QWEN3_MOE, qwen_moe.QWEN2_MOE, gpt_oss.FAMILY,
    deepseek_v3.DEEPSEEK_V3, deepseek_v3.DEEPSEEK_V32, deepseek_v4.FAMILY, mixtral.FAMILY,
    phi3.FAMILY, glm4_moe.FAMILY, minimax_m2.FAMILY, gemma.GEMMA2, gemma.GEMMA3,
    gemma.GEMMA3_MM, gemma4.FAMILY, llama4.FAMILY, llama4.TEXT, qwen3_next.FAMILY,
    nemotron_h.FAMILY, granite_hybrid.FAMILY, kimi_linear.FAMILY, qwen_vl.QWEN2_5_VL,
    qwen_vl.QWEN3_VL, qwen_vl.QWEN3_VL_MOE, qwen3_5.QWEN3_5, qwen3_5.QWEN3_5_MOE,
    dense_decoder.FAMILY,
)
"""Every family, one row each."""

_BY_NAME = {f.name: f for f in ROWS}
_FAMILY_BY_MODEL_TYPE = {t: f.name for f in ROWS for t in f.model_types}
_FAMILY_BY_ARCH = {a: f.name for f in ROWS for a in f.architectures}
_FAMILY_BY_BARE_ARCH = {a: f.name for f in ROWS for a in f.bare_architectures}


def is_bare_decoder(architecture: str) -> bool:
    """A decoder saved without its lm_head (``LlamaModel``, ``MistralModel``, ``Qwen2Model``:
    ``Family.bare_architectures``), which vLLM's registry builds with the decoder's own class as
    an embedding model (0.11.0, 0.20.0 and 0.33.0 model_executor/models/registry.py
    ``_EMBEDDING_MODELS``: "MistralModel": ("llama", "LlamaForCausalLM")). Which runner vLLM
    picks for it under ``--runner auto`` is not in the config: config/model.py
    ``_get_default_runner_type`` (0.11.0, 0.33.0) returns "pooling" where the repository holds
    a sentence-transformers pooling config (``get_pooling_config``), else asks the registry,
    whose class is a text-generation model. memprof reads no repository file, so it sizes such
    a checkpoint only with ``--runner pooling`` (memprof/core/engines/vllm_pooling.py
    ``check_pooling``); under it ``--convert auto`` resolves to embed
    (``_get_default_convert_type``: the ``*Model`` suffix of ``_SUFFIX_TO_DEFAULTS``)."""
    return architecture in _FAMILY_BY_BARE_ARCH

FAMILIES: dict[str, LayerBuilder] = {f.name: f.build for f in ROWS}
"""Family name → the builder of its layers (and MTP layers)."""


def family_row(name: str) -> Family:
    """The row of family ``name`` (``ModelSpec.family``)."""
    return _BY_NAME[name]


def family_of_architecture(architecture: str) -> Family | None:
    """The row of the family whose ``architectures`` name ``architecture`` (None: no family
    names it)."""
    name = _FAMILY_BY_ARCH.get(architecture)
    return None if name is None else _BY_NAME[name]


def known_model_types() -> list[str]:
    return sorted(_FAMILY_BY_MODEL_TYPE)


ASSUMABLE: dict[str, str] = {"dense-decoder": dense_decoder.FAMILY.name}
"""``--assume-architecture`` value → the family an unknown architecture is then read as."""
ASSUMABLE_NAMES: tuple[str, ...] = tuple(ASSUMABLE)
ASSUMED: dict[str, str] = {dense_decoder.FAMILY.name: dense_decoder.ASSUMED}
"""Family → what reading a model as it assumes (for the estimate's note)."""


def known_families() -> list[str]:
    """``family (Architecture, …)`` for every family a config can name."""
    return [f"{f.name} ({', '.join(f.architectures)})" for f in ROWS if f.architectures]


def family_of(cfg: dict[str, Any], assume: str | None = None) -> tuple[str, str]:
    """(family name, architecture) of a config: by ``model_type``, else by
    ``architectures[0]``; an unknown one is the family ``assume`` opts into
    (``ASSUMABLE``), else a ``ConfigError`` naming the families memprof knows. A known
    ``model_type`` with an architecture its family does not list (``Qwen2ForRewardModel``,
    ``LlamaForSequenceClassification``: another head, another runner in vLLM, whose registry
    picks the class by ``architectures``) is never sized as the family's causal LM: a
    ``*ForSequenceClassification`` is the family of the causal LM vLLM converts
    (``score_heads.seq_cls_base``: its score head and poolers are the pooling runner's,
    memprof/core/engines/vllm_pooling.py), another classification or reward suffix is refused
    by name (``score_heads.refuse_score_head``), even under ``assume``; a bare decoder vLLM
    serves as an embedding model (``MistralModel``, ``is_bare_decoder``) is the family of the
    class vLLM builds for it, sized only on the pooling runner."""
    archs = cfg.get("architectures") or []
    arch = archs[0] if isinstance(archs, list) and archs else str(cfg.get("model_type", "?"))
    model_type = cfg.get("model_type")
    if not archs and model_type is None:
        raise ConfigError(
            "the config names no architecture (no 'architectures' and no 'model_type')",
            hint="pass the model's HF config.json",
        )
    if model_type in _FAMILY_BY_MODEL_TYPE and (not archs or arch in _FAMILY_BY_ARCH):
        return _FAMILY_BY_MODEL_TYPE[str(model_type)], arch
    if arch in _FAMILY_BY_ARCH:
        return _FAMILY_BY_ARCH[arch], arch
    if arch in _FAMILY_BY_BARE_ARCH:  # a decoder without its lm_head: an embedding model
        return _FAMILY_BY_BARE_ARCH[arch], arch
    base = seq_cls_base(arch, _FAMILY_BY_ARCH)  # a causal LM with a score head (classify)
    if base is not None:
        return _FAMILY_BY_ARCH[base], arch
    refuse_encoder_only(arch)  # no KV cache, another attention type: not a dense decoder
    refuse_score_head(arch)  # a score head on the pooling runner: not a causal LM
    if assume is not None:
        if assume not in ASSUMABLE:
            raise ConfigError(f"unknown --assume-architecture {assume[:40]!r}",
                              hint="one of: " + ", ".join(ASSUMABLE_NAMES))
        return ASSUMABLE[assume], arch
    raise ConfigError(
        f"memprof does not know the architecture {arch!r} (model_type {model_type!r}); "
        "it knows the families " + "; ".join(known_families()),
        hint="if it is a plain dense decoder (GQA attention + gated MLP, as Llama), pass "
             "--assume-architecture dense-decoder: the estimate then states that assumption",
    )


__all__ = ["ASSUMABLE", "ASSUMABLE_NAMES", "ASSUMED", "FAMILIES", "ROWS", "Built", "Family",
           "LayerBuilder", "family_of", "family_row", "is_bare_decoder", "known_families",
           "known_model_types"]
