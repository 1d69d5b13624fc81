"""LoRA's kernels in vLLM 0.7.x's V0 decode graphs (``LORA_GRAPH_NODES``' 0.7.1 row,
memprof/core/terms/lora.py): ``add_lora_linear`` fills its float32 buffer, then one
``bgmv_shrink`` and one ``bgmv_expand_slice`` per slice (0.7.1 / 0.7.3
lora/punica_wrapper/punica_gpu.py); the LoRA embedding six kernels (lora/layers.py
``VocabParallelEmbeddingWithLoRA.forward``)."""

from __future__ import annotations

import pytest

from memprof.core.components import TermContext
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.core.terms.lora import LORA_GRAPH_NODES, lora_graph_nodes


def _ctx(version: str, lora: bool = True) -> TermContext:
    dep = Deployment(engine_version=version, enable_lora=lora, max_lora_rank=32, dtype="float16")
    e = estimate("llama-3.1-8b", dep, gpu=resolve_gpu("T4", None))
    r = e.ranks[0]
    return TermContext(spec=e.spec, dep=e.deployment, gpu=e.gpu, coord=r.coord, plan=r.plan,
                       weights_bytes=r.weights_bytes, model_dtype=e.model_dtype, quant=e.quant)


@pytest.mark.parametrize("version", ["0.7.1", "0.7.3"])
def test_llama_8b_by_hand(version: str) -> None:
    """Per layer qkv_proj (3 slices) 1 + 6, o_proj 1 + 2, gate_up_proj (2) 1 + 4, down_proj
    1 + 2: 18; × 32 layers, and the embedding's 6."""
    assert lora_graph_nodes(_ctx(version)) == 32 * 18 + 6
    assert lora_graph_nodes(_ctx(version, lora=False)) == 0


def test_releases() -> None:
    row = next(r for r in LORA_GRAPH_NODES if r.holds("0.7.3"))
    assert row.value == (1, 2, 6)
    # 0.8.0 and 0.8.1 are not read: nothing charged; 0.8.2 takes LoRAKernelMeta's kernels
    assert not any(r.holds("0.8.0+v0") for r in LORA_GRAPH_NODES)
    assert next(r for r in LORA_GRAPH_NODES if r.holds("0.8.2")).value == (3, 2)
