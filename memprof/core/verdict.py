"""The verdict of a rank: ``startup_oom``, ``runtime_oom`` or ``fits``, the components that cause
it, and the headroom left at run time.

Process memory at run time (docs/memory-model.md): what is allocated before the engine's
baseline snapshot (CUDA context, eager NCCL) + the engine's envelope (vLLM: ``requested``, or
with ``--kv-cache-memory-bytes`` what it budgets plus that KV cache; SGLang: ``mem_fraction_static
× free before load``) + what it did not budget. Startup checks follow vLLM@52a31cc
(``request_memory`` in vllm/v1/worker/utils.py; "No available memory for the cache blocks" and the
"estimated maximum model length" of ``check_enough_kv_cache_memory`` in
vllm/v1/core/kv_cache_utils.py); graph memory outside the budget that does not fit when start-up
ends is a start-up failure too, because the engines capture their graphs while starting
(``memprof.core.startup_capture``).
"""

from __future__ import annotations

from typing import Literal, get_args

from memprof.base.units import fmt_bytes
from memprof.core.auto_fit import holds_back_null_block
from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.engines.base import LOADED_CATEGORIES, loaded_at_start
from memprof.core.gpus import GPU
from memprof.core.kvcache import KVCapacity, KVPlan, max_fitting_model_len
from memprof.core.startup_capture import overflow_of

__all__ = ["VERDICTS", "Verdict", "held_bytes", "loaded_at_start", "rank_verdict"]

Verdict = Literal["fits", "runtime_oom", "startup_oom"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)  # in increasing severity


def _names(comps: list[Component]) -> str:
    top = sorted(comps, key=lambda c: -c.bytes)[:3]
    return ", ".join(f"{c.name} {fmt_bytes(c.bytes)}" for c in top)


def held_bytes(comps: list[Component] | tuple[Component, ...]) -> int:
    """What a rank holds at run time: the sum of every component (baseline, budget, KV cache,
    runtime) — the figure a verdict of ``fits`` promises is at most the GPU's total."""
    return sum(c.bytes for c in comps)


def rank_verdict(dep: Deployment, gpu: GPU, plan: KVPlan, comps: list[Component], available: int,
             envelope: int, cap: KVCapacity, mml: int, mnbt: int, *, auto_fit: bool = False
             ) -> tuple[Verdict, list[str], int]:
    """startup_oom / runtime_oom / fits, the components that cause it, and the headroom.

    Process memory at run time (docs/memory-model.md): baseline (context, eager NCCL) + the
    engine's
    envelope (vLLM: requested, or with --kv-cache-memory-bytes what it budgeted plus that KV
    cache; SGLang: mfs × free-before-load) + what it did not budget. The envelope is never taken
    as less than what the rank really holds inside it, so the headroom is at most
    ``total − Σ components``: a rank whose weights exceed the GPU never shows positive headroom.
    SGLang's activations, graphs and non-torch memory live in the (1 − mfs) slack, so for it
    every non-loaded component counts against the slack.

    ``auto_fit``: vLLM's ``--max-model-len auto`` (``memprof.core.auto_fit``), ``mml`` the length
    it fitted (0: none fits, the engine stops); the capacity check then passes by construction.
    """
    total = gpu.total_bytes
    base = loaded_bytes = 0  # (one pass; the lists of names are built where a reason needs them)
    for c in comps:
        where = c.where
        if where == "baseline":
            base += c.bytes
        elif where == "budget" and c.category in LOADED_CATEGORIES:  # loaded_at_start
            loaded_bytes += c.bytes
    engine = engine_of(dep)
    used, outside = engine.used(comps, base, envelope)
    headroom = total - used
    if base + loaded_bytes > total:
        loaded = [c for c in comps if loaded_at_start(c)]
        return "startup_oom", [
            f"model load OOM: the rank's weights and load-time buffers "
            f"({fmt_bytes(loaded_bytes)}: {_names(loaded)}) and the memory in use before the "
            f"engine starts ({fmt_bytes(base)}) exceed the GPU's {fmt_bytes(total)} by "
            f"{fmt_bytes(base + loaded_bytes - total)}"], headroom
    if engine.startup_budget_refusal(dep, base, envelope, total):
        return "startup_oom", [
            f"free memory at start-up ({fmt_bytes(total - base)}, after "
            f"{_names([c for c in comps if c.where == 'baseline'])}) is "
            f"less than the requested {fmt_bytes(envelope)} (gpu_memory_utilization "
            f"{dep.gpu_memory_utilization})"], headroom
    if dep.kv_cache_memory_bytes and base + envelope > total:
        return "startup_oom", [
            f"--kv-cache-memory-bytes {fmt_bytes(dep.kv_cache_memory_bytes)} does not fit: with "
            f"{fmt_bytes(envelope - dep.kv_cache_memory_bytes)} the engine budgets besides it "
            f"and {fmt_bytes(base)} in use before it starts, the rank needs "
            f"{fmt_bytes(base + envelope)} of the GPU's {fmt_bytes(total)}"], headroom
    if auto_fit and mml <= 0:  # get_kv_cache_configs fits before it checks the memory
        return "startup_oom", [
            f"Cannot auto-fit max_model_len (--max-model-len auto): the "
            f"{fmt_bytes(max(0, available))} of KV cache the budget leaves hold no request of "
            "even one token"], headroom
    if 0 < available < plan.block_bytes:
        per_token = max(1, plan.block_bytes // max(1, plan.block_size))
        fit = available // per_token
        choices = engine.block_size_choices(dep.engine_version)
        if choices is not None:  # the engine takes only its CLI choices
            fit = max((c for c in choices if c <= fit), default=0)
        if fit == 0:
            return "startup_oom", [
                f"one KV block of {plan.block_size:,} tokens needs {fmt_bytes(plan.block_bytes)} "
                f"on this rank but the budget leaves {fmt_bytes(available)} for the KV cache; "
                "no block size the engine takes fits"], headroom
        return "startup_oom", [
            f"one KV block of {plan.block_size:,} tokens needs {fmt_bytes(plan.block_bytes)} "
            f"on this rank but the budget leaves {fmt_bytes(available)} for the KV cache; a "
            f"block size of at most {fit:,} tokens fits"], headroom
    if available <= 0 or cap.num_gpu_blocks == 0:
        held = [c for c in comps if engine.held_before_kv(c) and c.category != "kv_cache"]
        return "startup_oom", [
            f"No available memory for the cache blocks: the budget leaves "
            f"{fmt_bytes(available)} for the KV cache after {_names(held)}"], headroom
    # from 0.29.0 the check plans against the pool less BlockPool's null block (auto_fit.py)
    usable = cap.kv_cache_bytes - (plan.block_bytes if holds_back_null_block(
        dep.engine_version, dep.engine) else 0)
    if cap.request_bytes > usable and engine.refuses_request_over_kv:
        est = max_fitting_model_len(plan, usable, mnbt, mml)
        return "startup_oom", [
            f"one request of max_model_len {mml} needs {fmt_bytes(cap.request_bytes)} of KV cache "
            f"but {fmt_bytes(usable)} is available; estimated maximum model length "
            f"is {est}"], headroom
    over = overflow_of(used, outside, total)
    if over is not None:  # the graphs are captured at start-up (memprof/core/startup_capture.py)
        return "startup_oom", [
            f"{over.what} at start-up {'do' if ' and ' in over.what else 'does'} not fit: the "
            f"rank holds "
            f"{fmt_bytes(over.held_bytes)} when start-up ends ({_names(list(over.graphs))} "
            f"beside the engine's budget and what was in use before it), "
            f"{fmt_bytes(over.over_bytes)} more than the GPU's {fmt_bytes(total)}"], headroom
    if headroom < 0:
        return "runtime_oom", [
            f"the engine starts, but at run time {fmt_bytes(sum(c.bytes for c in outside))} it "
            f"did not budget ({_names(outside)}) exceeds the "
            f"{fmt_bytes(max(0, headroom + sum(c.bytes for c in outside)))} left outside its "
            f"budget by {fmt_bytes(-headroom)}"], headroom
    return "fits", [], headroom
