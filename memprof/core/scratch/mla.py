"""Scratch of the MLA decode backends (seed 000): the CUTLASS MLA and FlashInfer MLA decode
outputs, per layer (vLLM #37442) or shared (#37805), and the SM100 CUTLASS workspace."""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.models import Layer, ModelSpec
from memprof.core.scratch.buffer import (
    Part,
    ScratchBuffer,
    any_layer,
)

CUTLASS_MLA_MAX_HEADS = 128  # cutlass_mla.py MAX_HEADS: decode heads padded to 128 (vLLM #37442)
CUTLASS_MLA_LATENT = 512  # D_latent of the CUTLASS MLA decode output (vLLM #37442)
# g_sm100_workspace = SM100Workspace(128 MiB) (vLLM@52a31cc)
CUTLASS_MLA_WORKSPACE_BYTES = 128 * MiB


def _mla_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    del spec, dep
    return "" if layer.attention.kind == "mla" else None


def _flashinfer_mla_decode_layer(spec: ModelSpec, dep: Deployment, layer: Layer) -> str | None:
    """FlashInfer MLA allocates its decode output only for one query token per request (#37442);
    with speculative tokens (q_len > 1) it writes the padded rows instead."""
    if dep.num_speculative_tokens:
        return None
    return _mla_layer(spec, dep, layer)


_MLA_SHARED_SRC = ("vLLM #37805 (closed): one module-level g_*_decode_out for all layers; upstream "
                   "after the #38359 revert allocates the same shape per call (new_empty), one "
                   "layer's worth live at a time")

MLA_BUFFERS: tuple[ScratchBuffer, ...] = (
    # --- CUTLASS MLA decode output (seed 000; vLLM #37442 / #38359,
    # vllm/v1/attention/backends/mla/cutlass_mla.py) ---
    ScratchBuffer(
        key="cutlass_mla_decode_out", backend="cutlass_mla", name="CUTLASS MLA decode output",
        label="per layer", policy="per-layer", lifetime="per_layer_lazy", per_layer=True,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_tokens, CUTLASS_MLA_MAX_HEADS, CUTLASS_MLA_LATENT)),),
        applies=_mla_layer, profiled=False,
        source="vLLM #37442 (merged 2026-03-19, reverted by #38359): CutlassMLAImpl._decode_out, "
               "zeros (B_q, 128, 512) per layer, grown lazily in forward_mqa"),
    ScratchBuffer(
        key="cutlass_mla_decode_out", backend="cutlass_mla", name="CUTLASS MLA decode output",
        label="shared", policy="shared", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_tokens, CUTLASS_MLA_MAX_HEADS, CUTLASS_MLA_LATENT)),),
        applies=_mla_layer, profiled=False, source=_MLA_SHARED_SRC),
    ScratchBuffer(
        key="cutlass_mla_workspace", backend="cutlass_mla", name="CUTLASS MLA SM100 workspace",
        label="workspace", policy="both", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="g_sm100_workspace", dtype="uint8",
                    shape=lambda d, k: (CUTLASS_MLA_WORKSPACE_BYTES,)),),
        applies=any_layer, profiled=True,
        source="vllm/v1/attention/backends/mla/cutlass_mla.py L69-99: module-level "
               "SM100Workspace(128 MiB), allocated when the backend is imported at model "
               "construction (model load); resize_ above 128 MiB not modelled"),
    # --- FlashInfer MLA decode output (seed 000) ---
    ScratchBuffer(
        key="flashinfer_mla_decode_out", backend="flashinfer_mla",
        name="FlashInfer MLA decode output", label="per layer", policy="per-layer",
        lifetime="per_layer_lazy", per_layer=True,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_seqs, d.local_heads, d.kv_lora_rank)),),
        applies=_flashinfer_mla_decode_layer, profiled=False,
        source="vLLM #37442 (reverted by #38359): FlashInferMLAImpl.forward_mqa, zeros "
               "(B, local heads, kv_lora_rank) per layer when q_len_per_req == 1"),
    ScratchBuffer(
        key="flashinfer_mla_decode_out", backend="flashinfer_mla",
        name="FlashInfer MLA decode output", label="shared", policy="shared",
        lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="out", dtype="mla_out", shape=lambda d, k: (
            d.decode_seqs, d.local_heads, d.kv_lora_rank)),),
        applies=_flashinfer_mla_decode_layer, profiled=False, source=_MLA_SHARED_SRC),
)
