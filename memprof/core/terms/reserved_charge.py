"""vLLM 0.8.0 – 0.9.0.1 and 0.27.0 on (V1) and 0.6.x (V0): memory the caching allocator holds but
did not hand out, charged to the KV budget as if it were non-torch memory.

vLLM 0.6.0 – 0.6.3.post1 take the budget's peak as the drop in free memory from ``init_device`` to
after the profile run (no ``empty_cache`` between), 0.6.4.x as below, 0.6.5 – 0.6.6.post1 as
``(total − free) − baseline − weights − allocated increase``: each charges the segments the
load left half used (``RESERVED_CHARGED``'s V0 rows).

Those releases' ``Worker.determine_available_memory`` (v1/worker/gpu_worker.py, read in the
0.8.0, 0.8.5 and 0.9.0 wheels) measures after the profile run::

    torch.cuda.empty_cache()
    torch_allocated_bytes = memory_stats()["allocated_bytes.all.current"]
    total_allocated_bytes = total − free                (mem_get_info)
    non_torch_allocations = total_allocated_bytes − torch_allocated_bytes
    peak_memory += non_torch_allocations

``empty_cache`` returns only segments with nothing allocated in them; the free blocks inside
segments that still hold a tensor stay reserved, count in ``total − free`` and not in
``allocated``, so they are charged like the CUDA context (``non_torch.NCCL_PLACEMENT``'s 0.8.0 row
charges that part). From 0.9.1 ``memory_profiling`` measures non-torch memory as ``cuda_memory −
torch reserved`` (utils.py ``MemorySnapshot``), and this term is gone.

From 0.27.0 the budget line charges them again (``RESERVED_CHARGED``'s last row): 0.27.1
utils/mem_utils.py ``memory_profiling`` sets ``total_consumed = before_create.free_memory −
after_profile.free_memory`` (``mem_get_info``, after the window's ``gc.collect()`` +
``empty_cache()``), the drop since the worker's init snapshot, and ``non_kv_cache_memory =
total_consumed + transient_peak_headroom``: what is reserved and not allocated is in the free
memory's drop (0.9.1 – 0.26.x read ``cuda_memory − memory_reserved`` as non-torch and the weights
as allocated bytes, so they did not see it). Read in the 0.27.1, 0.28.0 and 0.30.0 wheels; both
runners share it. The model loads under ``max_split_size_mb:20`` there
(``load_rounding.LOAD_MAX_SPLIT``), so a weight of 1-10 MiB still takes a 20 MiB segment
(``get_allocation_size``) whose unfilled tail is the hole: Qwen2.5-1.5B's qkv (6 MiB) and o_proj
(4.5 MiB) fill 16.5 MiB of each such segment and leave 3.5 MiB. Model Runner V2's sampler state
(``vllm_runner.sampler_state_tensors``), made in ``GPUModelRunner.load_model`` after the weights
and inside the same allocator scope, is replayed after them: its two [R, cdiv(V, 32)] tensors
(4.6 MiB at R = 256) fill holes that fit them. Not replayed: the runner's constructor buffers,
made before the load at PyTorch's default setting (``runner_buffers.py``: Model Runner V2's are
under 1 MiB each, in the small pool; the V1 runner's ``inputs_embeds`` [N, H] can open a 20 MiB
segment that the first weights then fill) [approximation].

What stays reserved is predicted by replaying the rank's model load through ``memprof.alloc``
(``load_rounding.load_ops``: weights in construction order, the model-load buffers, the RoPE
cache's freed fp32 temporaries) under the allocator setting the load ran with
(``load_rounding.load_alloc_conf``), then ``empty_cache``::

    charged = reserved − allocated   after the replay and empty_cache

The profile run's activations are freed before ``empty_cache``; those that landed in the free space
of a weight's segment leave it as it was, so the replay of the load alone gives the figure
[approximation: the profile run can split cached blocks differently; what the window itself keeps,
torch's cuBLAS workspace at the first GEMM, is not replayed, as where it lands depends on the
window's freed blocks (docs/model-runner-v2.md, "The cold start's second table")]. An AWQ or GPTQ
checkpoint repacked for Marlin is allocated as ``create_weights`` registers it, then each linear's
``process_weights_after_loading`` follows (``memprof.core.terms.marlin_repack``: the new layout
allocated, the old tensors and the zero points' unpacked temporaries freed, which leaves holes in
shared segments); the repacks that module does not replay (MoE experts, Machete, fp8 on Marlin) keep
those checkpoints' charge a lower bound. The runtime slack replay has no repack, so it subtracts the
load-only holes (``load_holes_bytes``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from memprof.base.units import fmt_bytes
from memprof.core.components import Component, TermContext
from memprof.core.engines import engine_of
from memprof.core.engines.vllm_pooling import convert_of
from memprof.core.engines.vllm_runner import sampler_state_tensors
from memprof.core.terms.activation import samples_in_profile_run
from memprof.core.terms.common import max_seqs
from memprof.core.terms.load_rounding import (
    SIMULATE_MAX_LAYERS,
    Op,
    kept_load_ops,
    last_free,
    load_alloc_conf,
    load_ops,
    simulate,
)
from memprof.core.terms.runner_v2_profile import v2_own_profile
from memprof.core.versions import Rule, rule_in_force, value_at

if TYPE_CHECKING:
    from memprof.alloc import CachingAllocator
    from memprof.alloc.monotone import MonotoneReplay

RESERVED_CHARGED: tuple[Rule, ...] = (
    Rule(name="reserved_not_allocated_charged", changes="non-torch: allocator holes in the "
         "budget", since="0.6.0", until="0.6.4",
         value="the drop in free memory across the profile run, with no empty_cache: the "
         "profile run's own segments above its allocated peak are not modelled "
         "[approximation]", introduced_by="before 0.6.0",
         removed_by="peak = torch peak + (total − free) − torch allocated (0.6.4)",
         generation="v0",
         source="0.6.0 – 0.6.3.post1 worker/worker.py determine_num_available_blocks: "
         "peak_memory = init_gpu_memory − mem_get_info free after the profile run, with no "
         "empty_cache between: every segment the caching allocator reserved is charged (the "
         "load's holes; the profile run's own rounding above its allocated peak is not "
         "modelled)"),
    Rule(name="reserved_not_allocated_charged", changes="non-torch: allocator holes in the "
         "budget", since="0.6.4", until="0.7.0",
         value="(total − free) − allocated, or memory_profiling's non-torch increase on "
         "allocated bytes",
         introduced_by="peak = torch peak + (total − free) − torch allocated (0.6.4)",
         removed_by="MemorySnapshot: non-torch = cuda_memory − memory_reserved (0.7.0 utils.py, "
         "as 0.7.1)",
         generation="v0",
         source="0.6.4.post1 worker/worker.py determine_num_available_blocks: empty_cache(); "
         "non_torch_allocations = (total − free) − allocated_bytes.all.current; 0.6.5 / "
         "0.6.6.post1 utils.py memory_profiling: non_torch_increase = (total − free) − "
         "baseline − weights − allocated increase (MemorySnapshot measures allocated bytes, "
         "not reserved, before 0.7.0)"),
    Rule(name="reserved_not_allocated_charged", changes="non-torch: allocator holes in the "
         "budget", since="0.8.0", until="0.9.1", value=True,
         introduced_by="V1 Worker.determine_available_memory (0.8.0)",
         removed_by="V1 MemorySnapshot / memory_profiling (0.9.1)", generation="v1",
         source="0.8.0 / 0.8.5 / 0.9.0 v1/worker/gpu_worker.py determine_available_memory: "
         "empty_cache(); non_torch_allocations = (total − free) − "
         "allocated_bytes.all.current; peak_memory += it"),
    Rule(name="reserved_not_allocated_charged", changes="non-torch: allocator holes in the "
         "budget", since="0.27.0", until=None,
         value="total_consumed, the drop in free memory from the worker's init snapshot to "
         "after the profile window's empty_cache",
         introduced_by="0.27.0 memory_profiling: total_consumed = before_create.free_memory − "
         "after_profile.free_memory; non_kv_cache_memory = total_consumed + "
         "transient_peak_headroom",
         generation="v1",
         source="0.27.1 / 0.28.0 utils/mem_utils.py memory_profiling lines 300-326 (0.30.0: "
         "295-321): gc.collect(); empty_cache(); after_profile.measure() (mem_get_info); "
         "total_consumed = before_create.free_memory − after_profile.free_memory, read by "
         "v1/worker/gpu_worker.py determine_available_memory (0.27.1 lines 500-526)"),
)
NAME = "allocator holes after empty_cache (charged as non-torch)"


def charged(ctx: TermContext) -> bool:
    """Does the release charge reserved-but-unallocated memory to the budget?"""
    return (rule_in_force(RESERVED_CHARGED, ctx.dep.engine_version, ctx.dep.engine) is not None
            and engine_of(ctx.dep).replays_model_load
            and ctx.spec.num_layers <= SIMULATE_MAX_LAYERS)


@lru_cache(maxsize=256)
def holes_after_empty_cache(ops: tuple[Op, ...], conf: str = "",
                            tail: tuple[int, ...] = ()) -> int:
    """``reserved − allocated`` after replaying ``ops`` then the mallocs ``tail`` under ``conf``
    (a ``PYTORCH_CUDA_ALLOC_CONF``) and ``empty_cache`` (``memprof.alloc``'s replica of
    PyTorch's caching allocator).

    Where ``conf`` sets at most ``max_split_size_mb``, the simulator runs to the last free of
    ``ops`` and on until no wholly free segment is left that a later malloc could be handed
    (``_never_handed_out``), and ``memprof.alloc.monotone`` continues the rest (as
    ``load_rounding.replay_rounding`` does): each segment the rest creates holds the allocation
    it was made for and nothing is freed, so ``empty_cache`` returns exactly those wholly free
    segments and the holes are the totals' ``reserved − allocated`` less them (exact; the
    simulator runs every op otherwise). ``ops``' replay to that point is kept once for every
    ``tail`` (``_load_replay``: a sweep asks it for each ``max_num_seqs`` of a layout, whose
    sampler state is the tail); a tail a wholly free segment could still be handed is replayed
    with the rest, op by op."""
    from memprof.alloc.config import AllocatorConfig, parse_conf

    parsed = parse_conf(conf)
    if parsed == AllocatorConfig(max_split_size=parsed.max_split_size):
        cut = _load_replay(ops, conf)  # kept: the load-only figure and every tail share it
        if cut is not None:
            if cut.whole_free == 0 or _never_handed_out(cut.sim, list(tail)):
                rest = cut.rest.copy().extend(list(tail))
                return (cut.sim.stats.current("reserved_bytes") + rest.reserved
                        - cut.sim.stats.current("allocated_bytes") - rest.allocated
                        - cut.whole_free)
            held = _tail_beside_whole(cut, tail)
            if held is not None:
                return held
    return _holes(ops + tuple((0, n) for n in tail), conf)


def _tail_beside_whole(cut: _Cut, tail: tuple[int, ...]) -> int | None:
    """The holes where a malloc of ``tail`` may be handed one of the cut's wholly free segments:
    the rest of the load never is (the cut's condition), so its mallocs leave those segments
    whole and free, and the tail's best fit runs over the rest's free blocks and them, by size
    (``monotone.MonotoneReplay.malloc``'s steps); a segment a tail malloc takes is whole no more.
    None where a malloc's best fit is a whole segment and a partly used block of the same size
    at once (which one PyTorch hands out rests on addresses the sizes do not hold)."""
    from bisect import bisect_left, insort

    from memprof.alloc.allocator import get_allocation_size
    from memprof.alloc.constants import K_LARGE_BUFFER, K_MIN_BLOCK_SIZE, K_SMALL_SIZE

    sim, rest, mss = cut.sim, cut.rest, cut.rest.max_split_size
    # the rest's free blocks hold the whole segments too (``continue_from`` takes every free
    # block of the simulator, and the rest's mallocs took none of them)
    pools: dict[bool, list[int]] = {True: list(rest.small), False: list(rest.large)}
    whole: dict[bool, list[int]] = {
        True: sorted(b.size for b in sim.small.whole.values()),
        False: sorted(b.size for b in sim.large.whole.values())}
    reserved = allocated = 0
    for nbytes in tail:
        size = (K_MIN_BLOCK_SIZE if nbytes < K_MIN_BLOCK_SIZE
                else -(-nbytes // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE)
        small = size <= K_SMALL_SIZE
        free, wholes = pools[small], whole[small]
        i = bisect_left(free, size)
        if i < len(free) and (small or not (
                (size < mss <= free[i]) or (size >= mss and free[i] >= size + K_LARGE_BUFFER))):
            block = free.pop(i)
            n_whole = wholes.count(block)
            if n_whole and free.count(block) + 1 > n_whole:
                return None  # a whole segment and a partly used block of one size
            if n_whole:
                wholes.remove(block)
        else:
            block = get_allocation_size(size)
            reserved += block
        left = block - size
        if left >= K_MIN_BLOCK_SIZE if small else (left > K_SMALL_SIZE and size < mss):
            insort(free, left)
            allocated += size
        else:
            allocated += block
    still_whole = sum(whole[True]) + sum(whole[False])
    return (sim.stats.current("reserved_bytes") + rest.reserved + reserved
            - sim.stats.current("allocated_bytes") - rest.allocated - allocated - still_whole)


class _Cut(NamedTuple):
    """The replay of a load where the simulator stopped (``sim``; the wholly free segments it
    leaves, ``whole_free`` bytes, cannot be handed to any later malloc of the load) and
    ``memprof.alloc.monotone`` took the rest of the load's mallocs (``rest``)."""

    sim: CachingAllocator
    whole_free: int
    rest: MonotoneReplay


@lru_cache(maxsize=64)
def _load_replay(ops: tuple[Op, ...], conf: str) -> _Cut | None:
    """``ops`` replayed as ``_holes`` replays them, kept where it stopped the simulator before
    the end (None where it ran every op: the tail then joins the simulator's run)."""
    from memprof.alloc.monotone import continue_from

    at, sim = _simulated_until_monotone(ops, conf)
    if at >= len(ops):
        return None
    whole = sum(b.size for b in (*sim.small.whole.values(), *sim.large.whole.values()))
    return _Cut(sim, whole, continue_from(sim).extend([n for _k, n in ops[at:]]))


def _simulated_until_monotone(ops: tuple[Op, ...], conf: str) -> tuple[int, CachingAllocator]:
    """The simulator run over ``ops`` to the last free and on while a wholly free segment could
    still be handed to a later malloc; (the index of the first op not run, the simulator)."""
    at = last_free(ops) + 1
    sim = simulate(ops[:at], conf)
    checked: set[int] | None = None
    while at < len(ops):
        ids = {*sim.small.whole, *sim.large.whole}
        if not ids:
            break
        if ids != checked:  # the wholly free segments changed: ask again
            checked = ids
            if _never_handed_out(sim, [n for _k, n in ops[at:]]):
                break
        sim.malloc(ops[at][1])  # after the last free: mallocs only
        at += 1
    return at, sim


def _holes(ops: tuple[Op, ...], conf: str) -> int:
    """``holes_after_empty_cache`` of ``ops`` alone, replayed from the start."""
    from memprof.alloc.config import AllocatorConfig, parse_conf
    from memprof.alloc.monotone import continue_from

    parsed = parse_conf(conf)
    if parsed == AllocatorConfig(max_split_size=parsed.max_split_size):
        at, sim = _simulated_until_monotone(ops, conf)
        if at >= len(ops):
            sim.empty_cache()
            s = sim.memory_stats()
            return s["reserved_bytes.all.current"] - s["allocated_bytes.all.current"]
        whole = sum(b.size for b in (*sim.small.whole.values(), *sim.large.whole.values()))
        rest = continue_from(sim).extend([n for _k, n in ops[at:]])
        return (sim.stats.current("reserved_bytes") + rest.reserved
                - sim.stats.current("allocated_bytes") - rest.allocated - whole)
    sim = simulate(ops, conf)
    sim.empty_cache()
    s = sim.memory_stats()
    return s["reserved_bytes.all.current"] - s["allocated_bytes.all.current"]


def _never_handed_out(sim: CachingAllocator, sizes: list[int]) -> bool:
    """Whether no malloc of ``sizes`` could be handed a wholly free segment of ``sim``, whatever
    the best fit: a small pool's to no request of the small pool; a large pool's to no request
    larger than it, none below ``max_split_size`` where it is at least that, and none it exceeds
    by ``max_non_split_rounding_size`` or more where the request is at least ``max_split_size``
    (``get_free_block``, PyTorch v2.11.0 c10/cuda/CUDACachingAllocator.cpp)."""
    from memprof.alloc.allocator import round_size
    from memprof.alloc.constants import K_SMALL_SIZE

    if not sim.small.whole and not sim.large.whole:
        return True
    conf = sim.conf
    mss, slack = conf.max_split_size, conf.max_non_split_rounding_size
    rounded = {round_size(n, conf) for n in set(sizes)}  # a load repeats its layers' sizes
    if sim.small.whole and any(r <= K_SMALL_SIZE for r in rounded):
        return False
    large = [r for r in rounded if r > K_SMALL_SIZE]
    for b in sim.large.whole.values():
        w = b.size
        for r in large:
            if r <= w and not (r < mss <= w) and not (r >= mss and w >= r + slack):
                return False
    return True


def load_holes_bytes(ctx: TermContext) -> int:
    """The holes of the model load alone (no repack), 0 where ``RESERVED_CHARGED`` does not
    hold: what the runtime slack replay (``memprof.core.terms.allocator``) also holds."""
    if not charged(ctx):
        return 0
    return holes_after_empty_cache(kept_load_ops(ctx), load_alloc_conf(ctx.dep, ctx.gpu))


def charge_ops(ctx: TermContext) -> tuple[Op, ...]:
    """The model load as the release allocates it, then each Marlin repack of
    ``memprof.core.terms.marlin_repack`` (the load alone where no layer is repacked)."""
    from memprof.core.terms.allocations import model_load_position
    from memprof.core.terms.load_rounding import fused
    from memprof.core.terms.marlin_repack import marlin_linears, repack_ops
    from memprof.core.weights.rank import weights_in_order_params

    layers = marlin_linears(ctx)
    if not layers:
        return kept_load_ops(ctx)
    by_name = {m.name + ".": m for m in layers}
    params: list[tuple[str, int]] = []
    done: set[str] = set()
    for name, n in fused(weights_in_order_params(ctx.spec, ctx.dep, ctx.quant, ctx.coord,
                                                 ctx.gpu.arch)):
        prefix = name[:name.rfind(".") + 1]
        m = by_name.get(prefix)
        if m is None:
            params.append((name, n))
        elif prefix not in done:
            done.add(prefix)
            params += m.created()
    ops, _ = load_ops(ctx, params)
    mallocs = sum(1 for k, _ in ops if k == 0)
    extra = mallocs - len(params)  # the RoPE and init-buffer mallocs load_ops puts at ``at``
    at = model_load_position([p for p, _ in params])
    handles = {p: i if i < at else i + extra for i, (p, _) in enumerate(params)}
    return tuple(repack_ops(layers, handles, list(ops), mallocs, ctx.gpu.sm_count,
                            ctx.dep.engine_version))


def after_load_sizes(ctx: TermContext) -> tuple[int, ...]:
    """What the runner allocates after the weights inside the load's allocator scope and keeps:
    Model Runner V2's sampler state on a rank that samples (the component
    ``activation.v2_sampler_state`` charges), in the order it is made; nothing else."""
    dep = ctx.dep
    if (v2_own_profile(ctx) is None or not samples_in_profile_run(dep, ctx.coord)
            or convert_of(dep) is not None):  # no Sampler on a pooling model (vllm_pooling.py)
        return ()
    return tuple(sampler_state_tensors(max_seqs(dep), ctx.spec.vocab_size,
                                       1 + dep.num_speculative_tokens))


def reserved_charge_bytes(ctx: TermContext) -> int:
    """The bytes ``RESERVED_CHARGED`` releases charge for this rank (0 where it does not hold)."""
    if not charged(ctx):
        return 0
    return holes_after_empty_cache(charge_ops(ctx), load_alloc_conf(ctx.dep, ctx.gpu),
                                   after_load_sizes(ctx))


def reserved_charge_terms(ctx: TermContext) -> list[Component]:
    """One component (category allocator, where budget, profiled) while ``RESERVED_CHARGED``
    holds: the model load's free blocks that ``empty_cache`` cannot return."""
    n = reserved_charge_bytes(ctx)
    if not n:
        return []
    from memprof.core.terms.marlin_repack import marlin_linears

    repacked = len(marlin_linears(ctx))
    what = (f"the model load and {repacked} Marlin repack(s) (process_weights_after_loading)"
            if repacked else "the model load")
    how = value_at(RESERVED_CHARGED, ctx.dep.engine_version, True, ctx.dep.engine)
    charges = how if isinstance(how, str) else "(total − free) − allocated"
    return [Component(name=NAME, category="allocator", bytes=n, where="budget", profiled=True,
                      formula=f"memprof.alloc replay of {what}, then empty_cache: "
                      f"reserved − allocated = {fmt_bytes(n)} (vLLM {ctx.dep.engine_version} "
                      f"charges {charges})")]
