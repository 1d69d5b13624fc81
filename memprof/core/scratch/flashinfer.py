"""FlashInfer (GQA) workspace: one module-level buffer, allocated at the first metadata build."""

from __future__ import annotations

from memprof.base.units import MiB
from memprof.core.scratch.buffer import (
    Part,
    ScratchBuffer,
    any_layer,
)

# VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE default (vLLM@52a31cc)
FLASHINFER_WORKSPACE_BYTES = 394 * MiB

FLASHINFER_BUFFERS: tuple[ScratchBuffer, ...] = (
    # --- FlashInfer (GQA) workspace ---
    ScratchBuffer(
        key="flashinfer_workspace", backend="flashinfer", name="FlashInfer workspace",
        label="workspace", policy="both", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="workspace", dtype="uint8",
                    shape=lambda d, k: (FLASHINFER_WORKSPACE_BYTES,)),),
        applies=any_layer, profiled=False,
        source="VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE (394 MiB, vllm/envs.py ~L1577); allocated "
               "on the first metadata build, which the attention-free profile run never does "
               "[derived]"),
)
