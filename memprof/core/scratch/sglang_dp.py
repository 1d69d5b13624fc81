"""SGLang DP-attention gathered buffer (seed 002): persistent in the CUDA-graph runner (#8280)
or allocated per forward (SGL@d315eb7 ``get_global_dp_buffer``)."""

from __future__ import annotations

from memprof.core.scratch.buffer import (
    SGLANG_DP_ATTENTION,
    Part,
    ScratchBuffer,
    any_layer,
)

SGLANG_BUFFERS: tuple[ScratchBuffer, ...] = (
    # --- SGLang DP-attention gathered buffer (seed 002; SGLang #8280 cuda_graph_runner.py;
    # SGL@d315eb7 layers/dp_attention.py) ---
    ScratchBuffer(
        key="sglang_dp_gathered", backend=SGLANG_DP_ATTENTION,
        name="SGLang DP-attention gathered buffer", label="persistent in the CUDA-graph pool",
        policy="per-layer", lifetime="shared_workspace", per_layer=False,
        parts=(Part(label="gathered_buffer", dtype="model", shape=lambda d, k: (
            d.graph_max_bs * d.tokens_per_bs * d.dp, d.hidden)),),
        applies=any_layer, profiled=False,
        source="SGLang #8280 (c0fb25e9) cuda_graph_runner.py: zeros (max_bs·tokens_per_bs·"
               "dp_size, hidden) held by the graph runner (the #8277 era); allocated after the "
               "KV pool, in the (1 − mem_fraction_static) slack"),
    ScratchBuffer(
        key="sglang_dp_gathered", backend=SGLANG_DP_ATTENTION,
        name="SGLang DP-attention gathered buffer", label="per forward", policy="shared",
        lifetime="per_step", per_layer=False,
        parts=(Part(label="global_dp_buffer", dtype="model", shape=lambda d, k: (
            d.graph_max_bs * d.tokens_per_bs * d.dp, d.hidden)),),
        applies=any_layer, profiled=False,
        source="SGLang@d315eb7 layers/dp_attention.py get_global_dp_buffer: torch.empty per "
               "forward, MAX_LEN mode max·dp rows (decode / CUDA-graph default)"),
)
