"""The allocator term of many deployments at once: the same replay as
``memprof.core.terms.allocator.allocator_runtime_terms``, with the work that deployments share
done once.

The replay of one rank is a prefix (the weights tensor by tensor) and a suffix (the scratch seen
at start-up, the KV-cache tensors, then the lazily allocated scratch). Deployments that differ
only in their budget (``max_model_len``, ``gpu_memory_utilization``, the KV dtype,
``max_num_seqs`` …) share the prefix: it is replayed once into a simulator that is kept, the
suffix is allocated on top, the statistics are read, and the suffix is freed again. Nothing is
freed in a replay, so freeing the suffix merges every block it split back into the free block
it came from, and ``empty_cache`` returns the segments it created (a prefix segment always holds
a live tensor): the simulator is where it was. ``tests/test_sweep.py`` checks the component
against the original term, byte for byte and formula for formula.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from operator import itemgetter
from typing import Any

from memprof.alloc.constants import K_MIN_BLOCK_SIZE, K_MIN_LARGE_ALLOC, SIZE_MAX
from memprof.base.units import round_up
from memprof.batch.memo import ReadMemo, ReadMemoFn
from memprof.batch.steps import LayoutKeys
from memprof.core.components import Component, TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.kvcache import KVPlan, kv_tensor_sizes
from memprof.core.terms.allocations import model_load_buffers, model_load_position
from memprof.core.terms.allocator import (
    allocation_size,
    allocator_runtime_terms,
    slack_formula,
)
from memprof.core.terms.init_buffers import init_buffer_terms
from memprof.core.terms.load_rounding import (
    SIMULATE_MAX_LAYERS,
    load_alloc_conf,
    load_max_split_size,
    load_rounding_bytes,
)
from memprof.core.terms.load_segments import load_segments_bytes
from memprof.core.terms.reserved_charge import charged, load_holes_bytes
from memprof.core.terms.rope_cache import rope_cache_terms
from memprof.core.weights import weights_key

_first, _second = itemgetter(0), itemgetter(1)
MAX_PREFIXES = 256  # simulators kept (one per distinct weights + start-up scratch sequence)


def _scratch_sizes(ctx: TermContext) -> tuple[tuple[int, bool], ...]:
    """(bytes, seen at start-up) of each scratch tensor of ``ctx``'s rank, in order."""
    from memprof.core.scratch.terms import scratch_tensors

    return tuple((math.prod(t.shape) * dtype_bytes(t.dtype), t.profiled)
                 for t in scratch_tensors(ctx))


class AllocatorReplayCache:
    """A drop-in for ``allocator_runtime_terms`` that shares replays between deployments."""

    def __init__(self, layout: LayoutKeys | None = None) -> None:
        self._layout = layout or LayoutKeys()  # a class of ranks' settings as a number
        self._weights: dict[tuple[Any, ...], tuple[tuple[int, ...], int]] = {}
        self._specs: dict[int, Any] = {}
        # a class of ranks (everything but gpu_memory_utilization) → (prefix id, prefix, its
        # model-load rounding); a prefix is hashed once, when first met, and known by its id
        # after that
        self._prefixes: dict[tuple[Any, ...], tuple[int, tuple[int, ...], int]] = {}
        self._pids: dict[tuple[int, ...], int] = {}
        # (weights key, model-load buffer sizes) → (prefix id, prefix)
        self._by_weights: dict[tuple[Any, ...], tuple[int, tuple[int, ...]]] = {}
        self._next_pid = itertools.count()  # never reused: a cleared id names no later prefix
        self._sims: dict[tuple[int, int], Any] = {}  # (prefix id, split) → its replay state
        # (prefix id, suffix, load rounding, where the KV tensors are in it) → the component
        self._stats: dict[tuple[Any, ...], Component] = {}
        # KV layouts: a plan (by id, kept alive) → the id of its sizes per block
        self._plans: dict[int, KVPlan] = {}
        self._layout_of: dict[int, int] = {}
        self._layouts: dict[tuple[int, ...], int] = {}
        self._load: dict[tuple[Any, ...], int] = {}
        # the model-load buffer terms, remembered by what they read (a class of ranks is
        # everything but gpu_memory_utilization; these read a few settings of it)
        self._load_terms = [ReadMemo(rope_cache_terms), ReadMemo(init_buffer_terms)]
        # the rank's scratch (sizes, and whether the engine allocates it at start-up), kept by
        # what it reads: the batch and context length for some backends, the KV block count
        # only where a buffer is sized by the KV pool
        self._scratch = ReadMemoFn(_scratch_sizes, direct_when_reading_everything=False)
        # a class of ranks' prefix (``_prefix``) by the settings its computation reads
        self._by_reads = ReadMemoFn(self._compute_prefix, direct_when_reading_everything=False)

    def _prefix(self, ctx: TermContext) -> tuple[int, tuple[int, ...], int]:
        """(id, sizes) of the rank's weights and model-load buffers, and the model-load rounding
        (``_load_rounding``), kept per class of ranks: none reads gpu_memory_utilization or the
        KV cache."""
        self._specs.setdefault(id(ctx.spec), ctx.spec)  # alive while its id is in a key
        key = (id(ctx.spec), self._layout(ctx.dep), ctx.gpu, ctx.coord, ctx.model_dtype,
               ctx.quant)
        known = self._prefixes.get(key)
        if known is None:
            if len(self._prefixes) >= 64 * MAX_PREFIXES:
                self._prefixes.clear()
                self._pids.clear()
                self._by_weights.clear()
            # a layout not met yet: its prefix is kept by what it reads (the weights key, the
            # model-load buffers' settings, the model dtype), so layouts that differ in the
            # batch, the lengths or the KV dtype share it
            known = self._prefixes[key] = self._by_reads.value(ctx)
        return known

    def _compute_prefix(self, ctx: TermContext) -> tuple[int, tuple[int, ...], int]:
        pid, prefix = self._weight_sizes(ctx)
        return pid, prefix, self._load_rounding(ctx, pid)

    def _weight_sizes(self, ctx: TermContext) -> tuple[int, tuple[int, ...]]:
        """(id, sizes) of the rank's weights tensor by tensor with the model-load buffers where
        ``rank_allocations`` puts them (the weights cached per weights key, the buffers per what
        their terms read); the sequence is a function of the weights key and the buffers'
        sizes, and is built and hashed once for them, however many layouts share it."""
        extra = tuple(a.bytes for a in model_load_buffers(
            ctx, [c for term in self._load_terms for c in term(ctx)]))
        wkey = (self._weights_key(ctx), extra)
        known = self._by_weights.get(wkey)
        if known is None:
            sizes, at = self._weights_and_position(ctx)
            prefix = sizes[:at] + extra + sizes[at:] if extra else sizes
            pid = self._pids.get(prefix)
            if pid is None:
                pid = self._pids[prefix] = next(self._next_pid)
            if len(self._by_weights) >= 64 * MAX_PREFIXES:
                self._by_weights.clear()
            known = self._by_weights[wkey] = (pid, prefix)
        return known

    def _load_rounding(self, ctx: TermContext, pid: int) -> int:
        """``load_rounding_bytes(ctx)`` + ``load_segments_bytes(ctx)`` (what the load figure holds
        of the slack) + ``load_holes_bytes(ctx)`` (the load's holes a release's budget charges),
        as ``allocator_runtime_terms`` takes them off, once per weights sequence, model dtype
        and model-load buffers (what its replay reads; the prefix ``pid`` names the buffers),
        the allocator setting the load runs under and whether the release charges the holes."""
        key = (self._weights_key(ctx), ctx.model_dtype, pid, load_alloc_conf(ctx.dep, ctx.gpu),
               charged(ctx))
        known = self._load.get(key)
        if known is None:
            if len(self._load) >= 64 * MAX_PREFIXES:
                self._load.clear()
            known = self._load[key] = (load_rounding_bytes(ctx) + load_segments_bytes(ctx)
                                       + load_holes_bytes(ctx))
        return known

    def _weights_key(self, ctx: TermContext) -> tuple[Any, ...]:
        """``weights_key`` with the spec by identity (this object keeps it alive)."""
        self._specs.setdefault(id(ctx.spec), ctx.spec)
        return (id(ctx.spec), *weights_key(ctx.spec, ctx.dep, ctx.quant, ctx.coord,
                                           ctx.gpu.arch)[1:])

    def _weights_and_position(self, ctx: TermContext) -> tuple[tuple[int, ...], int]:
        from memprof.core.weights.rank import weights_in_order_params

        d = ctx.dep
        key = self._weights_key(ctx)
        known = self._weights.get(key)
        if known is None:
            params = weights_in_order_params(ctx.spec, d, ctx.quant, ctx.coord, ctx.gpu.arch)
            # (the per-parameter passes in C: a rank holds a few thousand parameters)
            known = (tuple(map(_second, params)), model_load_position(list(map(_first, params))))
            self._weights[key] = known
        return known

    def _kv_layout(self, plan: KVPlan) -> int:
        """A small id of the KV tensors' sizes per block of ``plan`` (``kv_tensor_sizes`` is
        linear in the block count), so that a rank's key holds no tensor-by-tensor tuple."""
        known = self._layout_of.get(id(plan))
        if known is None:
            if len(self._layout_of) >= 64 * MAX_PREFIXES:
                self._layout_of.clear()
                self._plans.clear()
            self._plans[id(plan)] = plan  # alive while its id is a key
            per_block = tuple(kv_tensor_sizes(plan, 1))
            if plan.pool_tensors:  # an engine's own tensors have a fixed part: their rows too
                per_block += (-1, *(n for t in plan.pool_tensors for n in t))
            known = self._layouts.setdefault(per_block, len(self._layouts))
            self._layout_of[id(plan)] = known
        return known

    def __call__(self, ctx: TermContext) -> list[Component]:
        if ctx.spec.num_layers > SIMULATE_MAX_LAYERS:
            return allocator_runtime_terms(ctx)
        scratch = self._scratch.value(ctx)
        pid, prefix, load = self._prefix(ctx)
        split = load_max_split_size(ctx.dep, ctx.gpu)  # the load's allocator setting
        # the suffix (scratch seen at start-up, the KV tensors, the lazy scratch) is a function
        # of the scratch, the KV layout and the block count: the key holds those
        key = (pid, split, scratch, self._kv_layout(ctx.plan), ctx.num_gpu_blocks, load)
        comp = self._stats.get(key)
        if comp is None:
            kv = kv_tensor_sizes(ctx.plan, ctx.num_gpu_blocks)
            early = [n for n, seen in scratch if seen]
            suffix = (*early, *kv, *(n for n, seen in scratch if not seen))
            lazy = len(suffix) - len(kv)  # scratch tensors, at start-up or lazily
            kv_sizes = Counter(kv)  # a few distinct sizes (one per layer kind)
            reserved, requested, segments = self._replay(pid, split, prefix, suffix, lazy,
                                                         kv_sizes)
            kv_round = sum((allocation_size(n) - n) * k for n, k in kv_sizes.items())
            comp = Component(
                name="allocator slack (simulated)", category="allocator",
                bytes=max(0, reserved - requested - load), count=1, where="runtime",
                profiled=False, formula=slack_formula(len(prefix) + len(suffix), len(kv),
                                                      reserved, requested, segments, kv_round,
                                                      load))
            if len(self._stats) >= 64 * MAX_PREFIXES:
                self._stats.clear()
            self._stats[key] = comp
        return [comp]

    def _replay(self, pid: int, split: int, prefix: tuple[int, ...], suffix: tuple[int, ...],
                lazy: int, kv_sizes: Counter[int]) -> tuple[int, int, int]:
        """(reserved, requested, segments) after ``prefix`` (the model load, under the
        ``max_split_size`` ``split`` it ran with) then ``suffix`` (at PyTorch's default). Nothing
        is freed in between, so ``memprof.alloc.monotone`` gives the simulator's totals from the
        sizes of the free blocks alone; the state after ``prefix`` is kept and a copy continues
        with the suffix.

        Without scratch, when every KV tensor is at least 10 MiB and larger than every
        free block the prefix left, each gets a segment of its own (``allocation_size``; the
        < 2 MiB remainder it leaves can hold no later KV tensor), so the totals follow
        without the replay."""
        from memprof.alloc.monotone import MonotoneReplay

        state = self._sims.get((pid, split))
        if state is None:
            if len(self._sims) >= MAX_PREFIXES:
                self._sims.clear()
            state = MonotoneReplay(max_split_size=split).extend(prefix)
            state.max_split_size = SIZE_MAX
            self._sims[(pid, split)] = state
        if not suffix:
            return state.reserved, state.requested, state.segments
        if not lazy and (smallest := min(kv_sizes)) >= K_MIN_LARGE_ALLOC and (
                round_up(smallest, K_MIN_BLOCK_SIZE) > state.largest_free_block()):
            # (the suffix is the KV tensors alone: ``kv_sizes`` counts them by size)
            return (state.reserved + sum(allocation_size(n) * k for n, k in kv_sizes.items()),
                    state.requested + sum(n * k for n, k in kv_sizes.items()),
                    state.segments + len(suffix))
        end = state.copy().extend(suffix)
        return end.reserved, end.requested, end.segments
