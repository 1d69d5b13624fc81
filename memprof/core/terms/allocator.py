"""Caching-allocator slack at run time: the rounding of the KV-cache tensors, which vLLM counts
as ``num_blocks × block bytes`` and never sees."""

from __future__ import annotations

from collections import Counter

from memprof.alloc.constants import (
    K_LARGE_BUFFER,
    K_MIN_BLOCK_SIZE,
    K_MIN_LARGE_ALLOC,
    K_ROUND_LARGE,
    K_SMALL_BUFFER,
    K_SMALL_SIZE,
    SIZE_MAX,
)
from memprof.base.units import fmt_bytes, round_up
from memprof.core.components import Component, TermContext
from memprof.core.kvcache import kv_tensor_sizes
from memprof.core.terms.allocations import rank_allocation_sizes_and_load
from memprof.core.terms.load_rounding import (
    SIMULATE_MAX_LAYERS,
    load_max_split_size,
    load_rounding_bytes,
)
from memprof.core.terms.load_segments import load_segments_bytes
from memprof.core.terms.reserved_charge import load_holes_bytes


def allocation_size(nbytes: int) -> int:
    """Bytes the caching allocator reserves for one request of ``nbytes``
    (``round_size`` then ``get_allocation_size``, PyTorch v2.11.0
    c10/cuda/CUDACachingAllocator.cpp DeviceCachingAllocator::malloc; the constants from
    ``memprof.alloc.constants``)::

        size = 512·ceil(n/512);  ≤ 1 MiB → 2 MiB segment;  < 10 MiB → 20 MiB;  else 2 MiB·ceil
    """
    size = max(K_MIN_BLOCK_SIZE, round_up(nbytes, K_MIN_BLOCK_SIZE))
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return round_up(size, K_ROUND_LARGE)


# beyond SIMULATE_MAX_LAYERS, the closed form (a replay would take seconds)


def allocator_runtime_terms(ctx: TermContext) -> list[Component]:
    """The caching allocator's slack at run time (category "allocator", where "runtime", not
    profiled): what it reserves beyond the bytes asked for, for the allocations memprof knows
    the order of — the weights tensor by tensor, the scratch seen at start-up, the KV-cache
    tensors, the lazily allocated scratch (``memprof.core.terms.allocations``) — replayed through
    ``memprof.alloc``'s replica of PyTorch's allocator (exact against an H200 on the ground
    truth of tests/data/alloc_golden)::

        slack = reserved − Σ requested − load rounding   (segment rounding, unsplit remainders,
                                                      splits)

less the unsplit remainders of the model load that vLLM's weights figure already holds
(``memprof.core.terms.load_rounding``: they are in ``memory_allocated``, so in the budget);
never below 0.

    vLLM budgets the KV cache as ``num_blocks × block bytes`` and the weights as allocated bytes,
    so this is memory the engine never sees. Activations and graphs are transient and not in
    the replay. Ranks of more than ``SIMULATE_MAX_LAYERS`` layers use the closed form of the KV
    tensors' rounding (``allocation_size``) instead. No fixed fragmentation allowance is added
    (vLLM's own 150 MiB ``redundancy_buffer_memory`` is an "empirically observed underestimate",
    not a fragmentation measurement: vLLM@52a31cc gpu_worker.py determine_available_memory).
    Needs ``ctx.num_gpu_blocks`` (a runtime term).
    """
    if ctx.spec.num_layers > SIMULATE_MAX_LAYERS:
        sizes = kv_tensor_sizes(ctx.plan, ctx.num_gpu_blocks)
        slack = sum((allocation_size(n) - n) * k for n, k in Counter(sizes).items())
        return [Component(name="allocator slack (simulated)", category="allocator",
                          bytes=slack, count=max(1, len(sizes)), where="runtime",
                          profiled=False,
                          formula=f"closed form: Σ over {len(sizes)} KV tensor(s) of "
                          f"round_up(size, 2 MiB) − size ({ctx.num_gpu_blocks} blocks)")]
    from memprof.alloc.monotone import MonotoneReplay

    allocs, loaded = rank_allocation_sizes_and_load(ctx)
    # nothing is freed: the simulator's totals follow from free-block sizes alone
    # (memprof.alloc.monotone, checked against the simulator op by op); the model load under
    # the allocator setting it ran with (load_rounding.LOAD_MAX_SPLIT), the rest at PyTorch's
    # default, which vLLM restores after the load
    sim = MonotoneReplay(max_split_size=load_max_split_size(ctx.dep, ctx.gpu))
    sim.extend(allocs[:loaded])
    sim.max_split_size = SIZE_MAX
    sim.extend(allocs[loaded:])
    reserved, requested = sim.reserved, sim.requested
    kv = kv_tensor_sizes(ctx.plan, ctx.num_gpu_blocks)
    kv_round = sum((allocation_size(n) - n) * k for n, k in Counter(kv).items())
    load = load_rounding_bytes(ctx)
    # the load's holes that vLLM 0.6.x and 0.8.0–0.9.0.1 charged to the budget already
    # (reserved_charge; the Marlin repack's holes are not in this replay, so only the load's
    # own are taken off)
    load += load_holes_bytes(ctx)
    # the segments an engine's free-memory-drop load figure holds whole (load_segments)
    load += load_segments_bytes(ctx)
    return [Component(
        name="allocator slack (simulated)", category="allocator",
        bytes=max(0, reserved - requested - load), count=1, where="runtime", profiled=False,
        formula=slack_formula(len(allocs), len(kv), reserved, requested, sim.segments,
                              kv_round, load))]


def slack_formula(count: int, kv: int, reserved: int, requested: int, segments: int,
                  kv_round: int, load: int) -> str:
    """The slack component's formula (shared with ``memprof.batch.replay``)."""
    less = f" − model-load rounding {fmt_bytes(load)} (in the weights)" if load else ""
    return (f"memprof.alloc replay of {count} allocations (weights, scratch, {kv} KV "
            f"tensor(s)): reserved {fmt_bytes(reserved)} − requested {fmt_bytes(requested)}"
            f"{less} in {segments} segments; the KV tensors' 2 MiB rounding alone is "
            f"{fmt_bytes(kv_round)}")
