"""TurboQuant decode scratch (seed 001): ``mid_o``/``output``/``lse`` per layer (vLLM #38479,
registered at construction) or from the WorkspaceManager (#40655 / #40941), and the
continuation-prefill K/V dequant buffers."""

from __future__ import annotations

from memprof.base.units import round_up
from memprof.core.attention import kind_of
from memprof.core.deployment import Deployment
from memprof.core.kvcache import TQ_BOUNDARY_LAYERS
from memprof.core.models import Layer, ModelSpec
from memprof.core.scratch.buffer import (
    Dims,
    Part,
    ScratchBuffer,
)

TQ_MAX_KV_SPLITS = 32  # attention_config.tq_max_kv_splits_for_cuda_graph default (vLLM@52a31cc)


def _tq_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    """TurboQuant layers: every layer whose kind TurboQuant can store (GQA) but the first and
    last ``TQ_BOUNDARY_LAYERS``, which stay in the model dtype (``get_boundary_skip_layers(n=2)``,
    vLLM@52a31cc model_executor/layers/quantization/turboquant/; as ``kvcache`` does)."""
    del dep
    n = spec.num_layers
    if not kind_of(layer.attention).supports_turboquant() or layer.is_mtp:
        return None
    if layer.index < TQ_BOUNDARY_LAYERS or layer.index >= n - TQ_BOUNDARY_LAYERS:
        return None
    return ""



_TQ_MID_O = Part(label="mid_o", dtype="fp32", shape=lambda d, k: (
    d.decode_seqs, d.local_heads, TQ_MAX_KV_SPLITS, d.head_dim + 1))
_TQ_LSE = Part(label="lse", dtype="fp32", shape=lambda d, k: (d.decode_seqs, d.local_heads))


def _tq_alloc_len(d: Dims) -> int:
    """``alloc_len = ceil(cached_len / block) · block`` with the longest continuation,
    ``cached_len = max_model_len − 1`` (turboquant_attn.py ``_continuation_prefill``,
    vLLM@52a31cc)."""
    return round_up(max(d.max_model_len - 1, 1), d.block_size)


_TQ_DEQUANT = tuple(
    Part(label=label, dtype="fp16", shape=lambda d, k: (1, d.local_kv_heads, _tq_alloc_len(d),
                                                        d.head_dim))
    for label in ("k", "v"))


TURBOQUANT_BUFFERS: tuple[ScratchBuffer, ...] = (
    # --- TurboQuant decode (seed 001; vLLM@52a31cc model_executor/layers/quantization/turboquant/)
    # ---
    ScratchBuffer(
        key="tq_decode", backend="turboquant", name="TurboQuant decode mid_o+output+lse",
        label="per layer", policy="per-layer", lifetime="per_layer_registered", per_layer=True,
        parts=(_TQ_MID_O,
               Part(label="output", dtype="fp32",
                    shape=lambda d, k: (d.decode_seqs, d.local_heads, d.head_dim)),
               _TQ_LSE),
        applies=_tq_layer, profiled=True,
        source="vLLM #38479 Attention._init_turboquant_buffers: register_buffer at model "
               "construction (counted in model load), B = max_num_seqs, S = 32; removed by #40941"),
    ScratchBuffer(
        key="tq_decode", backend="turboquant", name="TurboQuant decode mid_o+output+lse",
        label="shared", policy="shared", lifetime="shared_workspace", per_layer=False,
        parts=(_TQ_MID_O,
               Part(label="output", dtype="fp32",
                    shape=lambda d, k: (d.decode_seqs, d.local_heads, d.head_dim)),
               _TQ_LSE),
        applies=_tq_layer, profiled=False, workspace_manager=True,
        source="vLLM #40655 (seed 001) / #40941 (commit 2cc008e7): turboquant_attn.py "
               "_decode_attention takes the same three buffers from "
               "WorkspaceManager.get_simultaneous (256-B aligned), grown at the first decode. "
               "memprof keeps #40655's fp32 output; #40941's dtype fix writes it in the query "
               "dtype (2·B·Hq·D instead of 4·B·Hq·D, 4 MiB less at B=256, Hq=64, D=128)"),
    ScratchBuffer(
        key="tq_prefill_dequant", backend="turboquant", first_use="prefill",
        name="TurboQuant continuation-prefill K/V dequant", label="per layer",
        policy="per-layer", lifetime="per_layer_lazy", per_layer=True, parts=_TQ_DEQUANT,
        applies=_tq_layer, profiled=False,
        source="vLLM #38479 _continuation_prefill: per-layer _tq_k/_tq_v_dequant_buf grown "
               "lazily (issue #40420: unprofiled, OOM at ~185K-234K context); removed by #40941"),
    ScratchBuffer(
        key="tq_prefill_dequant", backend="turboquant", first_use="prefill",
        name="TurboQuant continuation-prefill K/V dequant", label="shared", policy="shared",
        lifetime="shared_workspace", per_layer=False, parts=_TQ_DEQUANT, applies=_tq_layer,
        profiled=False, workspace_manager=True,
        source="vLLM #40941 _continuation_prefill: WorkspaceManager.get_simultaneous of two "
               "(1, Hk, alloc_len, D) fp16"),
)
