"""Classification and reward checkpoints of a decoder (``Qwen3ForSequenceClassification``,
``LlamaForSequenceClassification``, ``Qwen2ForRewardModel``): another head on the decoder,
another runner in vLLM, which memprof does not model.

vLLM picks the runner and conversion of an architecture it does not list by its suffix
(config/model.py ``_SUFFIX_TO_DEFAULTS``, read in 0.11.0, 0.20.0 and 0.33.0):
``ForSequenceClassification`` and ``ClassificationModel`` → ``--runner pooling --convert
classify`` (``ForTokenClassification`` too from 0.20.0), and ``ForRewardModeling`` /
``RewardModel`` → the pooling runner (``--convert reward`` in 0.11.0, ``embed`` in 0.20.0 and
0.33.0). Its registry then builds the family's ``*ForCausalLM`` through
``as_seq_cls_model`` (model_executor/models/adapters.py; registry.py ``_normalize_arch``
replaces the suffix): a score head ``ReplicatedLinear`` [num_labels, H] on every rank (fp32 in
0.11.0, the head dtype in 0.20.0 and 0.33.0) in place of the lm_head, and the classify /
token_classify poolers in the profile run. memprof has no rule for either, so such a checkpoint
is refused by name instead of being sized as the family's causal LM (or, under
``--assume-architecture``, as a dense decoder with an lm_head).
"""

from __future__ import annotations

from memprof.base.errors import ConfigError

# config/model.py _SUFFIX_TO_DEFAULTS entries with the pooling runner and a head of their own
# (read in 0.11.0, 0.20.0 and 0.33.0); the bare ``Model`` suffix (embed) is models.families'
SCORE_HEAD_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification",
                       "ClassificationModel", "ForRewardModeling", "RewardModel")


def refuse_score_head(architecture: str) -> None:
    """A :class:`ConfigError` for a classification or reward architecture
    (``SCORE_HEAD_SUFFIXES``)."""
    if architecture.endswith(SCORE_HEAD_SUFFIXES):
        raise ConfigError(
            f"{architecture} is a classification or reward checkpoint: vLLM serves it on its "
            "pooling runner with a score head in place of the lm_head (--convert classify), "
            "which memprof does not model",
            hint="memprof sizes decoder-only embedding models (a *ForCausalLM such as "
                 "Qwen3-Embedding) with --runner pooling --convert embed")
