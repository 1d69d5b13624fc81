"""Caching-allocator slack at run time: the rounding of the KV-cache tensors, which vLLM counts
as ``num_blocks × block bytes`` and never sees."""

from __future__ import annotations

from collections import Counter

from memprof.base.units import MiB, round_up
from memprof.core.components import Component, TermContext
from memprof.core.kvcache import KVPlan

# Caching allocator (PyTorch @eb42ad6 c10/cuda/CUDACachingAllocator.cpp; PyTorch @eb42ad6
# c10/cuda/CUDACachingAllocator.cpp DeviceCachingAllocator::malloc,
# c10/cuda/CUDACachingAllocator.cpp @eb42ad6).
ALLOC_SMALL_SIZE = 1 * MiB  # kSmallSize
ALLOC_SMALL_BUFFER = 2 * MiB  # kSmallBuffer
ALLOC_LARGE_BUFFER = 20 * MiB  # kLargeBuffer
ALLOC_MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ALLOC_ROUND_LARGE = 2 * MiB  # kRoundLarge
ALLOC_MIN_BLOCK = 512  # kMinBlockSize

def allocation_size(nbytes: int) -> int:
    """Bytes the caching allocator reserves for one request of ``nbytes``
    (``round_size`` then ``get_allocation_size``, PyTorch @eb42ad6 c10/cuda/CUDACachingAllocator.cpp
    DeviceCachingAllocator::malloc)::

        size = 512·ceil(n/512);  ≤ 1 MiB → 2 MiB segment;  < 10 MiB → 20 MiB;  else 2 MiB·ceil
    """
    size = max(ALLOC_MIN_BLOCK, round_up(nbytes, ALLOC_MIN_BLOCK))
    if size <= ALLOC_SMALL_SIZE:
        return ALLOC_SMALL_BUFFER
    if size < ALLOC_MIN_LARGE_ALLOC:
        return ALLOC_LARGE_BUFFER
    return round_up(size, ALLOC_ROUND_LARGE)


def kv_tensor_sizes(plan: KVPlan, num_blocks: int) -> list[int]:
    """One ``torch.zeros(size, int8)`` per ``KVCacheTensor`` (``_allocate_kv_cache_tensors``,
    vLLM@52a31cc gpu_model_runner.py):

    - uniform: one tensor per layer cache, ``page_layer × num_blocks``;
    - hybrid: ``group_size`` tensors of ``page × num_blocks`` (group_size = block bytes / page);
    - DeepSeek-V4 packed: one slab of ``block_stride × num_blocks`` (vLLM kv_cache_utils.py
    DeepSeek-V4 packed pool).
    """
    if num_blocks <= 0:
        return []
    if plan.layout == "dsv4_packed":
        return [plan.block_bytes * num_blocks]
    if plan.layout == "hybrid":
        page = plan.layers[0].page_bytes
        return [page * num_blocks] * (plan.block_bytes // page)
    return [layer.page_bytes * num_blocks for layer in plan.layers]


def allocator_runtime_terms(ctx: TermContext) -> list[Component]:
    """Reserved − allocated of the KV-cache tensors (category "allocator", where "runtime", not
    profiled): ``Σ over KV tensors of (allocation_size(size) − size)``; vLLM counts the KV cache as
    ``num_blocks × block bytes`` and never sees the rounding.

    No fixed fragmentation allowance is added: memprof has no measured basis for one (vLLM's own
    150 MiB ``redundancy_buffer_memory`` in its post-capture suggestion is an "empirically observed
    underestimate" slack, not a fragmentation measurement, vLLM@52a31cc gpu_worker.py
    determine_available_memory).
    Needs ``ctx.num_gpu_blocks`` (a runtime term).
    """
    sizes = kv_tensor_sizes(ctx.plan, ctx.num_gpu_blocks)
    slack = sum((allocation_size(n) - n) * k for n, k in Counter(sizes).items())
    return [Component(name="allocator rounding (KV tensors)", category="allocator", bytes=slack,
                      count=max(1, len(sizes)), where="runtime", profiled=False,
                      formula=f"Σ over {len(sizes)} KV tensor(s) of round_up(size, 2 MiB) − size "
                      f"({ctx.num_gpu_blocks} blocks)")]
