"""The lines the engine itself logs about its KV budget, as the modelled release prints them, so
that an estimate can be read against a start-up log of that release.

Which lines a release prints is a ``Rule`` row (``BUDGET_LOG``); the figures are the estimate's.
"""

from __future__ import annotations

from memprof.base.units import GiB
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, RankEstimate
from memprof.core.versions import Rule, value_at

# 0.6.0, 0.6.6.post1 and 0.7.2 engine/arg_utils.py EngineArgs.swap_space: float = 4 (GiB)
V0_SWAP_SPACE_BYTES = 4 * GiB

# The values of ``BUDGET_LOG``'s rows:
#   v0_blocks:      "# GPU blocks: N, # CPU blocks: M" only (0.6.0 – 0.6.2)
#   v0_blocks_max:  and "Maximum concurrency for L tokens per request: Xx" (0.6.3)
#   v0_results:     0.6.4's one-line "Memory profiling results: …" before them
#   v0_lines_gpu:   0.7.1's budget lines ("v0"), with "# GPU blocks" (0.6.5 – 0.6.6.post1)
#   v0:             the budget lines, "# cuda blocks: N, # CPU blocks: M", "Maximum concurrency"
#   v1_no_budget, v1: V1's
BUDGET_LOG: tuple[Rule, ...] = (
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.6.0",
         until="0.6.3", value="v0_blocks", introduced_by="before 0.6.0",
         removed_by="'Maximum concurrency' log (first released in 0.6.3)",
         source="0.6.0, 0.6.1.post2 and 0.6.2 executor/gpu_executor.py "
         "GPUExecutor.initialize_cache ('# GPU blocks: %d, # CPU blocks: %d'); "
         "worker/worker.py determine_num_available_blocks logs nothing", generation="v0"),
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.6.3",
         until="0.6.4", value="v0_blocks_max",
         introduced_by="'Maximum concurrency' log (first released in 0.6.3)",
         removed_by="'Memory profiling results' log (first released in 0.6.4)",
         source="0.6.3 and 0.6.3.post1 executor/gpu_executor.py GPUExecutor.initialize_cache "
         "('Maximum concurrency for %s tokens per request: %.2fx', num_gpu_blocks × block_size "
         "/ max_model_len)", generation="v0"),
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.6.4",
         until="0.6.5", value="v0_results",
         introduced_by="'Memory profiling results' log (first released in 0.6.4)",
         removed_by="memory_profiling's multi-line report (first released in 0.6.5)",
         source="0.6.4 and 0.6.4.post1 worker/worker.py determine_num_available_blocks "
         "('Memory profiling results: total_gpu_memory=%.2fGiB initial_memory_usage=%.2fGiB "
         "peak_torch_memory=%.2fGiB memory_usage_post_profile=%.2fGiB non_torch_memory=%.2fGiB "
         "kv_cache_size=%.2fGiB gpu_memory_utilization=%.2f')", generation="v0"),
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.6.5",
         until="0.7.0", value="v0_lines_gpu",
         introduced_by="memory_profiling's multi-line report (first released in 0.6.5)",
         removed_by="'# cuda blocks' (0.7.0 executor/executor_base.py '# %s blocks')",
         source="0.6.5 and 0.6.6.post1 worker/worker.py determine_num_available_blocks (the "
         "same four budget lines as 0.7.2); executor/gpu_executor.py initialize_cache ('# GPU "
         "blocks: %d, # CPU blocks: %d', 'Maximum concurrency …')", generation="v0"),
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.7.0",
         until="0.11.0", value="v0",
         introduced_by="V0 engine (VLLM_USE_V1=0 by default before 0.8.0)",
         removed_by="V0 engine removed (0.11.0)",
         source="0.7.2 worker/worker.py Worker.determine_num_available_blocks ('model weights "
         "take …; non_torch_memory takes …; PyTorch activation peak memory takes …; the rest "
         "of the memory reserved for KV Cache is …'); executor/executor_base.py "
         "initialize_cache ('# cuda blocks: N, # CPU blocks: M', 'Maximum concurrency …'); "
         "the same lines in 0.7.0 (worker/worker.py, executor/executor_base.py) and in the V0 "
         "worker of 0.8.0, 0.8.5, 0.10.1 and 0.10.2 "
         "(determine_available_kv_cache_memory from 0.10.2)", generation="v0"),
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.8.0",
         until="0.9.1", value="v1_no_budget", introduced_by="V1 on by default in 0.8.0",
         removed_by="'Available KV cache memory' log (first released in 0.9.1)",
         source="0.8.0 / 0.9.0 v1/worker/gpu_worker.py determine_available_memory (no info "
         "log of the budget); v1/core/kv_cache_utils.py ('GPU KV cache size: N tokens', "
         "'Maximum concurrency …')", generation="v1"),
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.9.1",
         until=None, value="v1",
         introduced_by="'Available KV cache memory' log (first released in 0.9.1)",
         source="0.9.1 / 0.33.0 v1/worker/gpu_worker.py determine_available_memory "
         "('Available KV cache memory: %.2f GiB'); v1/core/kv_cache_utils.py",
         generation="v1"),
)


def _gib(n: float) -> str:
    return f"{n / GiB:.2f}"


def _results_line(e: Estimate, r: RankEstimate, weights: int, activation: int, non_torch: int,
                  util: float) -> str:
    """vLLM 0.6.4's "Memory profiling results" line (worker/worker.py
    determine_num_available_blocks): ``peak_torch_memory`` = torch's allocated peak (weights +
    the profile run's activations), ``non_torch_memory`` = (total − free) − allocated after
    ``empty_cache`` (the CUDA context, NCCL, the allocator's holes and any other process),
    ``memory_usage_post_profile`` = total − free then (weights + non-torch) and
    ``initial_memory_usage`` = total − free before the profile run (that less what the profile
    run itself loaded outside torch: the components named "(profile run)")."""
    during = sum(c.bytes for c in r.components if c.category == "non_torch" and c.in_budget
                 and "(profile run)" in c.name)
    post = weights + non_torch
    return (f"Memory profiling results: total_gpu_memory={_gib(e.gpu.total_bytes)}GiB "
            f"initial_memory_usage={_gib(post - during)}GiB "
            f"peak_torch_memory={_gib(weights + activation)}GiB "
            f"memory_usage_post_profile={_gib(post)}GiB non_torch_memory={_gib(non_torch)}GiB "
            f"kv_cache_size={_gib(r.available_kv_bytes)}GiB gpu_memory_utilization={util:.2f}")


def engine_log(e: Estimate, r: RankEstimate) -> list[str]:
    """The budget lines vLLM logs for this rank at ``e.deployment.engine_version`` (SGLang and
    ``--kv-cache-memory``: none modelled, an empty list)."""
    d = e.deployment
    if not engine_of(d).logs_budget_lines or d.kv_cache_memory_bytes:
        return []
    style = str(value_at(BUDGET_LOG, d.engine_version, "v1"))
    mml = e.max_model_len
    if style.startswith("v0"):
        def cat(name: str) -> int:
            return sum(c.bytes for c in r.components
                       if c.category == name and c.in_budget and c.profiled)

        util = d.gpu_memory_utilization or 0.0
        cpu_blocks = V0_SWAP_SPACE_BYTES // r.plan.block_bytes if r.plan.block_bytes else 0
        device = "cuda" if style == "v0" else "GPU"
        blocks = [f"# {device} blocks: {r.kv.num_gpu_blocks}, # CPU blocks: {cpu_blocks}"]
        if style != "v0_blocks":
            blocks.append(f"Maximum concurrency for {mml} tokens per request: "
                          f"{r.kv.num_gpu_blocks * r.plan.block_size / mml:.2f}x")
        if style in ("v0_blocks", "v0_blocks_max"):
            return blocks
        if style == "v0_results":
            return [_results_line(e, r, cat('weights'), cat('activation'),
                                  cat('non_torch') + cat('allocator'), util), *blocks]
        # 0.6.5 – 0.6.6.post1's non_torch_increase holds the allocator's holes too (their
        # MemorySnapshot measures allocated bytes, not reserved: RESERVED_CHARGED)
        non_torch = cat('non_torch') + (cat('allocator') if style == "v0_lines_gpu" else 0)
        return [
            f"the current vLLM instance can use total_gpu_memory ({_gib(e.gpu.total_bytes)}GiB)"
            f" x gpu_memory_utilization ({util:.2f}) = {_gib(util * e.gpu.total_bytes)}GiB",
            f"model weights take {_gib(cat('weights'))}GiB; non_torch_memory takes "
            f"{_gib(non_torch)}GiB; PyTorch activation peak memory takes "
            f"{_gib(cat('activation'))}GiB; the rest of the memory reserved for KV Cache is "
            f"{_gib(r.available_kv_bytes)}GiB.",
            *blocks,
        ]
    lines = [] if style == "v1_no_budget" else [
        f"Available KV cache memory: {_gib(r.available_kv_bytes)} GiB"]
    return [*lines, f"GPU KV cache size: {r.kv.tokens:,} tokens",
            f"Maximum concurrency for {mml:,} tokens per request: {r.kv.max_concurrency:.2f}x"]
