"""Encoder-only checkpoints (BERT, RoBERTa, GTE, Nomic, ModernBERT): embedding and reranking
models that vLLM serves on its pooling runner with bidirectional attention and no KV cache.

vLLM 0.11.0 model_executor/models/registry.py maps these architectures to bert.py, roberta.py,
bert_with_rope.py and modernbert.py, whose layers build ``EncoderOnlyAttention``
(attention/layers/encoder_only_attention.py: an attention type with no KV cache; 0.33.0
config/model.py ``is_chunked_prefill_supported``: "Pooling models with bidirectional attn do not
support chunked prefill"). memprof has no family for that attention type, so such a checkpoint is
refused by name instead of being sized as a decoder with a KV cache.
"""

from __future__ import annotations

from memprof.base.errors import ConfigError

# 0.11.0 registry.py _EMBEDDING_MODELS / _CROSS_ENCODER_MODELS entries of those four modules
ENCODER_ONLY_ARCHITECTURES = frozenset({
    "BertModel", "BertForSequenceClassification", "BertForTokenClassification",
    "GteModel", "GteNewModel", "GteNewForSequenceClassification", "NomicBertModel",
    "ModernBertModel", "ModernBertForSequenceClassification",
    "RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
    "XLMRobertaModel", "XLMRobertaForSequenceClassification",
})


def refuse_encoder_only(architecture: str) -> None:
    """A :class:`ConfigError` for an encoder-only architecture (``ENCODER_ONLY_ARCHITECTURES``)."""
    if architecture in ENCODER_ONLY_ARCHITECTURES:
        raise ConfigError(
            f"{architecture} is an encoder-only model (bidirectional attention, no KV cache on "
            "vLLM's pooling runner): memprof has no family for that attention type",
            hint="memprof sizes decoder-only embedding models (a *ForCausalLM such as "
                 "Qwen3-Embedding, gte-Qwen2 or e5-mistral) with --runner pooling")
