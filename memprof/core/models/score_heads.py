"""Classification and reward checkpoints of a decoder: which ones vLLM builds from a family
memprof knows, how many labels their score head has, and which ones stay refused.

vLLM picks the runner and conversion of an architecture its registry does not list by its
suffix (config/model.py ``_SUFFIX_TO_DEFAULTS``, read in 0.11.0, 0.20.0 and 0.33.0):
``ForSequenceClassification`` → ``--runner pooling --convert classify``, and the registry
builds the family's causal LM for it (model_executor/models/registry.py ``_normalize_arch``
replaces the suffix by the first of ``ForCausalLM``, ``ForConditionalGeneration``, … that it
lists) through ``as_seq_cls_model`` (model_executor/models/adapters.py): the decoder without its
lm_head, a score head ``ReplicatedLinear`` [num_labels, H], and the classify poolers
(memprof/core/engines/vllm_pooling.py sizes them). ``seq_cls_base`` names that causal LM;
``score_labels`` reads num_labels as vLLM resolves it.

Refused by name (``refuse_score_head``): ``ForTokenClassification`` (classify in 0.20.0's and
0.33.0's table, absent from 0.11.0's),
``ClassificationModel``, and the reward suffixes ``ForRewardModeling`` / ``RewardModel``
(``Qwen2ForRewardModel`` and ``InternLM2ForRewardModel`` are classes of their own in the
registry, with their own heads: qwen2_rm.py's two-layer ``score`` MLP), and a
``*ForSequenceClassification`` whose causal LM is no family memprof knows.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from memprof.base.errors import ConfigError

SEQ_CLS_SUFFIX = "ForSequenceClassification"
# vLLM's _SUFFIX_TO_DEFAULTS suffixes of a generation model, in its order: the base class
# _normalize_arch looks for (0.11.0, 0.20.0 and 0.33.0 config/model.py)
CAUSAL_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel")
# config/model.py _SUFFIX_TO_DEFAULTS entries with the pooling runner and a head of their own
# that memprof does not size (read in 0.11.0, 0.20.0 and 0.33.0)
SCORE_HEAD_SUFFIXES = ("ForTokenClassification", "ClassificationModel", "ForRewardModeling",
                       "RewardModel")
# adapters.py SEQ_CLS_LOAD_METHODS (0.11.0, 0.20.0, 0.33.0): the score head built from rows of
# an lm_head the load makes and frees
SEQ_CLS_METHODS = ("from_2_way_softmax", "no_post_processing")
# transformers PretrainedConfig: num_labels is len(id2label), 2 where the config states neither
DEFAULT_NUM_LABELS = 2


def is_seq_cls(architecture: str) -> bool:
    """``*ForSequenceClassification``: vLLM's ``--convert classify`` by suffix."""
    return architecture.endswith(SEQ_CLS_SUFFIX)


def seq_cls_base(architecture: str, known: AbstractSet[str] | dict[str, Any]) -> str | None:
    """The causal LM vLLM builds a ``*ForSequenceClassification`` from: the first of
    ``CAUSAL_SUFFIXES`` in place of the suffix that ``known`` names (registry.py
    ``_normalize_arch``, 0.11.0 / 0.20.0 / 0.33.0); ``None`` for another architecture or one
    no known class matches."""
    if not is_seq_cls(architecture):
        return None
    stem = architecture[:-len(SEQ_CLS_SUFFIX)]
    return next((stem + s for s in CAUSAL_SUFFIXES if stem + s in known), None)


def refuse_score_head(architecture: str) -> None:
    """A :class:`ConfigError` for a classification or reward architecture memprof does not size
    (``SCORE_HEAD_SUFFIXES``; a ``*ForSequenceClassification`` reaching here has a causal LM no
    family names)."""
    if architecture.endswith(SCORE_HEAD_SUFFIXES):
        raise ConfigError(
            f"{architecture} is a classification or reward checkpoint with a head of its own "
            "(vLLM's pooling runner), which memprof does not model",
            hint="memprof sizes *ForSequenceClassification checkpoints of the families it "
                 "knows (--convert classify) and decoder-only embedding models "
                 "(--convert embed)")
    if is_seq_cls(architecture):
        raise ConfigError(
            f"{architecture} is a classification checkpoint whose causal LM "
            f"({architecture[:-len(SEQ_CLS_SUFFIX)]}ForCausalLM) is no family memprof knows",
            hint="memprof sizes *ForSequenceClassification checkpoints of the families it "
                 "knows (Qwen2, Qwen3, Llama, Mistral, Gemma 2, ...)")


def _tokens(cfg: dict[str, Any]) -> list[Any] | None:
    tokens = cfg.get("classifier_from_token")
    if tokens is not None and (not isinstance(tokens, list) or not tokens):
        raise ConfigError("classifier_from_token must be a non-empty list of tokens, got "
                          f"{str(tokens)[:40]!r}", hint='e.g. "classifier_from_token": '
                          '["no", "yes"] (with --hf-overrides)')
    return tokens


def seq_cls_method(cfg: dict[str, Any], architecture: str) -> str | None:
    """The online conversion of an lm_head into the score head, or ``None`` for a checkpoint
    that stores ``score.weight``. ``method`` from the config, or ``from_2_way_softmax`` where a
    ``Qwen3ForSequenceClassification`` config sets ``is_original_qwen3_reranker``
    (model_executor/models/config.py ``Qwen3ForSequenceClassificationConfig``, 0.11.0 and
    0.33.0). vLLM asserts the method is one it has and, for ``from_2_way_softmax``, two tokens
    (adapters.py ``SequenceClassificationConfig``); ``classifier_from_token`` without a method
    fails its load (``seq_cls_model_loader``: ``assert method in SEQ_CLS_LOAD_METHODS``)."""
    tokens = _tokens(cfg)
    method = cfg.get("method")
    if (method is None and cfg.get("is_original_qwen3_reranker") is True
            and architecture == "Qwen3" + SEQ_CLS_SUFFIX):
        method = "from_2_way_softmax"
    if method is None and tokens is None:
        return None
    if method is None:
        raise ConfigError(
            "classifier_from_token without a method: vLLM's load asserts one "
            "(adapters.py seq_cls_model_loader)",
            hint='add "method": "from_2_way_softmax" (two tokens) or "no_post_processing"'
                 + (', or "is_original_qwen3_reranker": true on a Qwen3 reranker'
                    if architecture.startswith("Qwen3") else ""))
    if method not in SEQ_CLS_METHODS:
        raise ConfigError(
            f"the score head's conversion method {str(method)[:40]!r} is not one vLLM has "
            "(adapters.py SEQ_CLS_LOAD_METHODS)",
            hint="method is from_2_way_softmax or no_post_processing, with "
                 "classifier_from_token (e.g. --hf-overrides '{\"classifier_from_token\": "
                 "[\"no\", \"yes\"], \"method\": \"from_2_way_softmax\"}')")
    if tokens is None or (method == "from_2_way_softmax" and len(tokens) != 2):
        raise ConfigError(
            f"method {method} needs classifier_from_token"
            + (" with two tokens" if method == "from_2_way_softmax" else ""),
            hint='e.g. "classifier_from_token": ["no", "yes"] (vLLM asserts it: adapters.py '
                 "SequenceClassificationConfig)")
    return str(method)


def score_labels(cfg: dict[str, Any], architecture: str) -> tuple[int, str]:
    """(num_labels of the score head, where it came from), as vLLM sets it: 1 for
    ``from_2_way_softmax``, ``len(classifier_from_token)`` for ``no_post_processing``
    (adapters.py ``SequenceClassificationConfig.verify_and_update_config``, 0.11.0 / 0.20.0 /
    0.33.0), else the config's label count (transformers ``PretrainedConfig``: ``id2label``'s
    length where it is given, else ``num_labels``, else 2)."""
    method = seq_cls_method(cfg, architecture)
    if method == "from_2_way_softmax":
        return 1, "method from_2_way_softmax: one label"
    if method is not None:
        tokens = _tokens(cfg) or []
        return len(tokens), f"method {method}: one label per classifier_from_token"
    id2label = cfg.get("id2label")
    if isinstance(id2label, dict) and id2label:
        return len(id2label), "the config's id2label"
    n = cfg.get("num_labels")
    if n is not None:
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 1 << 20:
            raise ConfigError(f"num_labels must be a positive integer, got {str(n)[:40]!r}",
                              hint='e.g. "num_labels": 1')
        return n, "the config's num_labels"
    return DEFAULT_NUM_LABELS, "no id2label or num_labels in the config: transformers' default 2"
