"""Qwen3's LoRA embedding modules from vLLM 0.16.0 (memprof/core/models/families/qwen.py
QWEN3_LORA, memprof/core/terms/lora.py): embed_tokens and lm_head carry LoRA, and while a tied
lm_head is embed_tokens itself (0.16.0 to before 0.28.0) the LoRA model manager wraps it a
second time as a VocabParallelEmbeddingWithLoRA; hand counts from the release's
lora/layers/vocal_parallel_embedding.py and logits_processor.py ``create_lora_weights``."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.terms.lora import block  # the caching allocator's block of one request

EMB = "LoRA embed_tokens / lm_head buffers"


def _lora(model: str, dep: Deployment) -> dict[str, int]:
    e = estimate(model, dep, gpu=resolve_gpu("H100", None))
    return {c.name: c.bytes for c in e.ranks[0].components if c.name.startswith("LoRA")}


# Qwen3-0.6B and Qwen3-4B tie their embeddings; Qwen3-8B does not; vocab 151,936 each
@pytest.mark.parametrize(("model", "h", "version", "wrappers"), [
    ("qwen3-0.6b", 1024, "0.16.0", 2),  # embed_tokens, and the tied lm_head wrapped again
    ("qwen3-4b", 2560, "0.27.1", 2),
    ("qwen3-0.6b", 1024, "0.28.0", 1),  # lm_head a ParallelLMHead (tie_weights): not wrapped
    ("qwen3-8b", 4096, "0.27.1", 1),  # untied: lm_head a ParallelLMHead
])
def test_qwen3_embedding_lora_from_0_16(model: str, h: int, version: str,
                                        wrappers: int) -> None:
    n, r, v = 3, 16, 151936
    got = _lora(model, Deployment(engine_version=version, enable_lora=True, max_loras=n))
    # VocabParallelEmbeddingWithLoRA: A [L, org_vocab, r], B [L, 1, H, r] (lora dtype bf16)
    embedding = block(n * v * r * 2) + block(n * h * r * 2)
    # LogitsProcessorWithLoRA: A [L, 1, r, H], B [L, 1, vocab_size, r]
    head = block(n * r * h * 2) + block(n * v * r * 2)
    assert got[EMB] == wrappers * embedding + head


def test_qwen3_4b_64_loras_every_slot_holds_three_vocabulary_tensors() -> None:
    """The study's N64 deployment (row 1642): the 0.16.0-0.27.1 embedding LoRA of the tied
    Qwen3-4B is three [64, 151936, 16] bf16 tensors (two embedding A, the lm_head B)."""
    dep = Deployment(engine_version="0.27.1", enable_lora=True, max_loras=64)
    got = _lora("qwen3-4b", dep)
    vocab = 64 * 151936 * 16 * 2  # 296.75 MiB, a multiple of 512 B: its own block
    assert got[EMB] == 3 * vocab + 3 * 64 * 2560 * 16 * 2 == 949_223_424
    at_028 = _lora("qwen3-4b", dep.with_(engine_version="0.28.0"))[EMB]
    assert got[EMB] - at_028 == vocab + 64 * 2560 * 16 * 2  # the second embedding wrapper


def test_qwen3_before_0_16_still_has_none() -> None:
    got = _lora("qwen3-4b", Deployment(engine_version="0.15.1", enable_lora=True))
    assert EMB not in got
