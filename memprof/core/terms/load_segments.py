"""The caching allocator's segments inside a load figure that is a drop in free memory: the bytes
the load's segments hold beyond the tensors in them, which an engine that reads its load as
``mem_get_info`` free before − free after (each reading after ``empty_cache``) counts.

SGLang reads its load so (``Engine.load_is_free_memory_drop``): ``ModelRunner.load_model``
(``model_executor/model_runner.py``, read in the sglang 0.4.3, 0.5.9 and 0.5.17 wheels) takes
``get_available_gpu_memory`` before and after ``get_model``, and that function runs
``torch.cuda.empty_cache()`` then ``torch.cuda.mem_get_info`` (0.4.3 ``utils.py``, 0.5.9 and
0.5.17 ``utils/common.py``); "Load weight end. … mem usage" prints the difference and the pool is
sized after it. ``empty_cache`` returns only segments with nothing allocated in them
(PyTorch ``c10/cuda/CUDACachingAllocator.cpp`` ``release_cached_blocks``: a block is released
only where it is a whole segment, unsplit), so what the drop holds is every segment the load's
live tensors sit in, whole. A segment is larger than its tensor (``get_allocation_size``: a
request above 1 MiB and below 10 MiB gets a 20 MiB segment, one of 10 MiB or more is rounded up to
2 MiB; ``memprof.core.terms.allocator.allocation_size``), and the rest of it stays reserved
whether or not the allocator splits it off as a free block::

    Qwen3-32B at TP4, per layer:  qkv 25 MiB → 26;  o_proj 20 → 20;  gate_up 125 → 126;
                                  down 62.5 → 64     = 3.5 MiB × 64 layers
    figure = reserved − requested   after the replay and empty_cache

At TP1 the same model's shards are whole multiples of 2 MiB (qkv 100 MiB, down 250 MiB), so
the term is small there and grows with the TP size, which splits each matrix into shards that are
not. The load is replayed through ``memprof.alloc``'s replica of the caching allocator, in
construction order (``memprof.core.terms.load_rounding.load_ops``: the weights, the model-load
buffers where ``rank_allocations`` puts them), with the engine's own RoPE caches built in the
middle: SGLang's ``RotaryEmbedding._compute_cos_sin_cache`` (``layers/rotary_embedding.py``,
0.5.9) allocates ``t``, ``freqs``, ``cos``, ``sin`` and their ``cat`` in fp32 on the device (the
model is built under the target device), keeps ``cat`` on CUDA and converts it to the model dtype
elsewhere (``if not _is_cuda: cache = cache.to(dtype)``); the temporaries are freed, and later
weights are split from their cached blocks.

Not replayed: what a checkpoint's ``process_weights_after_loading`` swaps in after the load (a
repack or re-layout allocates the new tensor and frees the loaded one, which can leave other
holes); the replay is the load as the tensors are created. vLLM reads its load as allocated
bytes (``memprof.core.terms.load_rounding``), not this.
Published rows 401, 1201, 1202 and 1457 (SGLang at TP4, "mem usage" 15.50, 15.54, 7.08 and
15.50 GB) each sit within 0.01 GiB of the shard, the RoPE cache and this term (226 MiB, 226 MiB,
185 MiB, 226 MiB); Qwen3-32B's TP1 row (1452) moves by 1 MiB. At TP1 it is large only where a
checkpoint's own matrices are not whole 2 MiB multiples (DeepSeek-R1-Distill-Qwen-7B's o_proj,
24.5 MiB: 100 MiB, row 167) or are 1–10 MiB tensors sharing 20 MiB segments (Qwen3-0.6B: 55 MiB,
row 1453; Qwen3-30B-A3B-FP8's 8 MiB o_proj: 108 MiB, row 1455).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING

from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.engines import engine_of
from memprof.core.kvcache import rank_layers
from memprof.core.terms.allocations import model_load_position
from memprof.core.terms.init_buffers import init_buffer_terms
from memprof.core.terms.load_rounding import (
    SIMULATE_MAX_LAYERS,
    Op,
    fused,
    rope_build_ops,
    simulate,
)
from memprof.core.terms.rope_cache import rope_caches

if TYPE_CHECKING:
    from memprof.alloc import CachingAllocator

NAME = "allocator segments (model load)"


def load_segment_ops(ctx: TermContext) -> tuple[Op, ...]:
    """The rank's model-load allocations in construction order: the weights (a fused QKV
    projection one tensor), the RoPE caches built as the engine builds them (fp32 kept on CUDA,
    converted to the model dtype on ROCm: the module docstring) with their temporaries freed,
    the model-load buffers, then the rest of the weights."""
    from memprof.core.weights.rank import weights_in_order_params

    params = fused(weights_in_order_params(ctx.spec, ctx.dep, ctx.quant, ctx.coord,
                                           ctx.gpu.arch))
    sizes = [b for _, b in params]
    at = model_load_position([n for n, _ in params])
    ops: list[Op] = [(0, n) for n in sizes[:at]]
    cache_dtype = ctx.model_dtype if ctx.gpu.is_rocm else "float32"
    for c in rope_caches(ctx.spec, rank_layers(ctx.spec, ctx.dep, ctx.coord), ctx.model_dtype):
        ops += rope_build_ops(c._replace(dtype=cache_dtype),
                              sum(1 for k, _ in ops if k == 0))
    for b in init_buffer_terms(ctx):
        n = max(1, b.count)
        ops += [(0, b.bytes // n)] * n
    ops += [(0, n) for n in sizes[at:]]
    return tuple(ops)


@lru_cache(maxsize=256)
def segments_beyond_tensors(ops: tuple[Op, ...]) -> tuple[int, int, int]:
    """(reserved − requested, reserved, segments) after replaying ``ops`` through
    ``memprof.alloc`` and ``empty_cache``: the simulator up to the last free, then the
    allocation-only rest on free-block sizes (``_continue``), or the simulator throughout
    where that cannot tell which block the allocator takes."""
    last = max((i for i, (kind, _) in enumerate(ops) if kind == 1), default=-1)
    fast = _continue(simulate(ops[:last + 1]), ops[last + 1:])
    return fast if fast is not None else full_replay(ops)


def full_replay(ops: tuple[Op, ...]) -> tuple[int, int, int]:
    """``segments_beyond_tensors`` by the simulator alone, op by op, then ``empty_cache``."""
    sim = simulate(ops)
    sim.empty_cache()
    s = sim.memory_stats()
    reserved = s["reserved_bytes.all.current"]
    return reserved - s["requested_bytes.all.current"], reserved, s["segment.all.current"]


def _continue(sim: CachingAllocator, rest: tuple[Op, ...]) -> tuple[int, int, int] | None:
    """The allocation-only ``rest`` from ``sim``'s free blocks, as ``memprof.alloc.monotone``
    replays it (best fit by size, a new segment of ``get_allocation_size``, ``should_split``),
    keeping count of the free blocks that are whole segments: ``empty_cache`` releases those
    still untouched at the end. None where a block of a size both whole and split is taken
    (the allocator picks by address, which sizes alone do not tell)."""
    from memprof.alloc.allocator import get_allocation_size
    from memprof.alloc.constants import K_MIN_BLOCK_SIZE, K_SMALL_SIZE

    whole: Counter[int] = Counter(b.size for pool in (sim.small, sim.large)
                                  for b in pool.whole.values())
    pools = ([k[1] for k in sim.small.blocks], [k[1] for k in sim.large.blocks])
    split: Counter[int] = Counter(pools[0]) + Counter(pools[1])
    split.subtract(whole)
    s = sim.memory_stats()
    reserved, requested = s["reserved_bytes.all.current"], s["requested_bytes.all.current"]
    segments = s["segment.all.current"]
    for _, nbytes in rest:
        size = max(K_MIN_BLOCK_SIZE, -(-nbytes // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE)
        small = size <= K_SMALL_SIZE
        free = pools[0] if small else pools[1]
        i = bisect_left(free, size)
        if i < len(free):
            block = free.pop(i)
            if whole[block] > 0:
                if split[block] > 0:
                    return None
                whole[block] -= 1
            else:
                split[block] -= 1
        else:
            block = get_allocation_size(size)
            reserved += block
            segments += 1
        left = block - size
        if left >= K_MIN_BLOCK_SIZE if small else left > K_SMALL_SIZE:  # should_split
            insort(free, left)
            split[left] += 1
        requested += nbytes
    released = sum(size * n for size, n in whole.items())
    reserved -= released
    return reserved - requested, reserved, segments - sum(whole.values())


def _applies(ctx: TermContext) -> bool:
    return (engine_of(ctx.dep).load_is_free_memory_drop
            and ctx.spec.num_layers <= SIMULATE_MAX_LAYERS)


def load_segments_bytes(ctx: TermContext) -> int:
    """What the load figure holds of the allocator's slack (0 where the engine's figure is not
    a free-memory drop, or the rank is not replayed)."""
    return segments_beyond_tensors(load_segment_ops(ctx))[0] if _applies(ctx) else 0


def load_segments_terms(ctx: TermContext) -> list[Component]:
    """The segments' bytes beyond the load's tensors, as a model-load component (category
    weights, in the budget: the drop the engine subtracts before it sizes the pool); none
    where the engine does not read its load so, or it is 0."""
    if not _applies(ctx):
        return []
    ops = load_segment_ops(ctx)
    extra, reserved, segments = segments_beyond_tensors(ops)
    if extra <= 0:
        return []
    n = sum(1 for k, _ in ops if k == 0)
    return [Component(
        name=NAME, category="weights", bytes=extra,
        formula=f"memprof.alloc replay of {n} model-load allocations (RoPE temporaries freed), "
        f"then empty_cache: {segments} segments reserved {fmt_bytes(reserved)} − requested "
        f"{fmt_bytes(reserved - extra)}; the load figure is the drop in free memory, so it "
        "holds each segment whole (2 MiB rounding, 20 MiB segments of 1–10 MiB tensors)")]


__all__ = ["NAME", "load_segment_ops", "load_segments_bytes", "load_segments_terms",
           "segments_beyond_tensors"]
