"""The profiling graphs' all-reduce inputs that vLLM's custom all-reduce keeps resident: its
peers' IPC handles hold the segments of the freed profiling pool that held them (vLLM V1, 0.18.0
on, TP > 1, CUDA graphs, on CUDA).

How it comes about (read in the vLLM 0.19.0 and 0.22.0 wheels):

- from 0.18.0 the V1 worker captures graphs inside the memory profile's window
  (v1/worker/gpu_worker.py ``determine_available_memory`` -> ``profile_cudagraph_memory``, 0.22.0
  lines 392-411; ``memprof.core.terms.runner_v1_capture.V1_PROFILING_CAPTURE``): the two largest
  descriptors of each mode into a temporary pool, inside ``graph_capture``, whose custom
  all-reduce context (distributed/parallel_state.py ``graph_capture`` ->
  device_communicators/custom_all_reduce.py ``CustomAllreduce.capture``) ends in
  ``register_graph_buffers``: each rank sends the IPC handle of every allocation holding a
  captured all-reduce's input and opens its peers' (csrc/custom_all_reduce.cuh, which keeps every
  opened handle in ``ipc_handles_`` and closes them only in ``~CustomAllreduce``);
- the worker then drops the graphs (``CUDAGraphWrapper.clear_all_graphs``) and frees the pool
  (``_cleanup_profiling_kv_cache``: ``empty_cache``), and ``memory_profiling`` charges the
  window's non-torch increase (``used - reserved``, utils/mem_utils.py) to the KV budget;
- an allocation a peer still maps keeps its device memory after its owner frees it, until the
  peer closes the handle, while torch's reserved bytes drop at once (reports/gpu/ipc-free-open/,
  2x H200, driver 580.159.04): so every segment of the profiling pool that held a captured
  all-reduce's input stays in use, as non-torch memory inside the budget.

Which segments: the profiling captures' decode live sets (``activation.activation_stages`` of the
two largest sizes of each mode, PIECEWISE then FULL, FlashAttention 3's split-KV accumulators
with the FULL stages as ``cudagraph.full_graph_split_bytes`` adds them) replayed through
``memprof.alloc``'s caching allocator into one private pool, as ``cudagraph_model`` replays the
pool; an all-reduce input is the [T, H] tensor a stage holds just before its "all-reduce out"
(the out-of-place all-reduce's output), taken by the custom all-reduce where its bytes are below
the communicator's ``max_size`` (custom_all_reduce.py ``should_custom_ar``;
``symm_mem.custom_all_reduce_max_size``); the charge is the bytes of the distinct segments such
a tensor was placed in. [approximation: the live sets are memprof's per-layer-kind stages, not
the captured forward's own allocation sequence; said in the formula]

Not charged on ROCm (HIP's IPC behaviour was not measured), nor under Model Runner V2 (0.22.0's
``profile_cudagraph_memory`` returns 0; V2's own estimate from 0.29.0 was not read for this).
"""

from __future__ import annotations

from memprof.alloc.allocator import CachingAllocator
from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.terms.activation import activation_stages
from memprof.core.terms.cudagraph import engine_graph_modes, full_graph_split_bytes
from memprof.core.terms.custom_allreduce import custom_all_reduce_applies
from memprof.core.terms.runner_v1_capture import PROFILED_PER_MODE, v1_profiles_graphs
from memprof.core.terms.symm_mem import custom_all_reduce_max_size

GOLDEN = "reports/gpu/ipc-free-open/"
NAME = "profiling graphs' all-reduce inputs kept by the peers' IPC handles"
ALL_REDUCE_OUT = "all-reduce out"


def _stages(ctx: TermContext, mode: str, tokens: int) -> list[tuple[tuple[str, int], ...]]:
    """The named blocks of each decode live set of a capture of ``mode`` at ``tokens``."""
    accum = full_graph_split_bytes(ctx, tokens) if mode == "FULL" else {}
    out = []
    for st in activation_stages(ctx, tokens=tokens, rows=0, decode=True):
        parts = tuple((n, b) for n, b in st.parts if b > 0)
        extra = accum.get(st.name, 0)
        out.append(parts + ((("split-KV accumulators", extra),) if extra else ()))
    return out


def registered_segment_bytes(ctx: TermContext, modes: dict[str, list[int]],
                             max_size: int) -> tuple[int, int, int]:
    """(bytes of the distinct pool segments holding a registered all-reduce input, their count,
    the pool's reserved bytes) after replaying the profiled captures' live sets."""
    alloc = CachingAllocator()
    alloc.begin_capture(1, stream=1)
    inputs: list[int] = []
    for mode in ("PIECEWISE", "FULL"):
        for tokens in sorted(modes.get(mode, ()), reverse=True)[:PROFILED_PER_MODE]:
            for parts in _stages(ctx, mode, tokens):
                held = []
                for i, (_name, nbytes) in enumerate(parts):
                    h = alloc.malloc(nbytes, stream=1)
                    held.append(h)
                    nxt = parts[i + 1] if i + 1 < len(parts) else None
                    if (nxt is not None and nxt[0].startswith(ALL_REDUCE_OUT)
                            and nxt[1] == nbytes and nbytes < max_size):
                        inputs.append(alloc.active[h].addr)
                for h in held:
                    alloc.free(h)
    alloc.end_capture()
    segments = [(int(s["address"]), int(s["total_size"])) for s in alloc.snapshot()]  # type: ignore[call-overload]
    hit = {(a, n) for a, n in segments for x in inputs if a <= x < a + n}
    return sum(n for _a, n in hit), len(hit), sum(n for _a, n in segments)


def graph_input_handle_terms(ctx: TermContext) -> list[Component]:
    """One non-torch component in the budget where the V1 runner profiles its graphs on CUDA
    (``v1_profiles_graphs``) with the custom all-reduce on a TP group
    (``custom_all_reduce_applies``): the bytes of the profiling pool's segments that held a
    captured all-reduce's input (``registered_segment_bytes``); nothing elsewhere."""
    dep, gpu = ctx.dep, ctx.gpu
    if dep.tp < 2 or gpu.is_rocm or not custom_all_reduce_applies(dep, gpu):
        return []
    if not v1_profiles_graphs(ctx):
        return []
    modes = {m: v for m, v in engine_graph_modes(ctx).items() if v}
    if not modes:
        return []
    max_size = custom_all_reduce_max_size(ctx, dep.tp)
    held, count, pool = registered_segment_bytes(ctx, modes, max_size)
    if not held:
        return []
    sizes = ", ".join(f"{m} {sorted(v, reverse=True)[:PROFILED_PER_MODE]}"
                      for m, v in modes.items())
    return [Component(
        name=NAME, category="non_torch", bytes=held, count=count, where="budget", profiled=True,
        formula=f"{count} of the profiling pool's segments ({fmt_bytes(held)} of its "
        f"{fmt_bytes(pool)}) hold a captured all-reduce's input below the custom all-reduce's "
        f"{fmt_bytes(max_size)} max_size ({sizes}: memprof's decode live sets replayed into one "
        "private pool [approximation: per-layer-kind stages, not the captured forward's own "
        "allocations]); the peers open them at register_graph_buffers and keep them open, so "
        "they stay in use after the worker frees the profiling pool and count in the budget "
        "window's non-torch increase (vLLM 0.18.0+ V1 profile_cudagraph_memory; "
        "csrc/custom_all_reduce.cuh ipc_handles_; " + GOLDEN + ")")]
