"""The KV cache as a component: the blocks the budget left, times the bytes one block costs on
the rank (layout and page sizes in ``memprof.core.kvcache``)."""

from __future__ import annotations

from memprof.core.components import Component
from memprof.core.kvcache import KVCapacity, KVPlan


def kv_cache_component(plan: KVPlan, cap: KVCapacity) -> Component:
    """``num_gpu_blocks × block_bytes`` (vLLM ``get_kv_cache_config_from_groups``,
    vllm/v1/core/kv_cache_utils.py @52a31cc)."""
    return Component(name="KV cache", category="kv_cache", bytes=cap.kv_cache_bytes,
                     count=cap.num_gpu_blocks or 1,
                     formula=f"{cap.num_gpu_blocks} blocks × {plan.block_bytes} B "
                     f"({plan.formula})")
