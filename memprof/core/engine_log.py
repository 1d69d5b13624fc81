"""The lines the engine itself logs about its KV budget, as the modelled release prints them, so
that an estimate can be read against a start-up log of that release.

Which lines a release prints is a ``Rule`` row (``BUDGET_LOG``); the figures are the estimate's.
"""

from __future__ import annotations

from memprof.base.units import GiB
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, RankEstimate
from memprof.core.versions import Rule, value_at

V0_SWAP_SPACE_BYTES = 4 * GiB  # 0.7.2 engine/arg_utils.py EngineArgs.swap_space: float = 4 (GiB)

BUDGET_LOG: tuple[Rule, ...] = (
    Rule(name="budget_log_lines", changes="report: the engine's budget line", since="0.7.1",
         until="0.11.0", value="v0",
         introduced_by="V0 engine (VLLM_USE_V1=0 by default before 0.8.0)",
         removed_by="V0 engine removed (0.11.0)",
         source="0.7.2 worker/worker.py Worker.determine_num_available_blocks ('model weights "
         "take …; non_torch_memory takes …; PyTorch activation peak memory takes …; the rest "
         "of the memory reserved for KV Cache is …'); executor/executor_base.py "
         "initialize_cache ('# cuda blocks: N, # CPU blocks: M', 'Maximum concurrency …'); "
         "the same lines in the V0 worker of 0.8.0, 0.8.5, 0.10.1 and 0.10.2 "
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


def engine_log(e: Estimate, r: RankEstimate) -> list[str]:
    """The budget lines vLLM logs for this rank at ``e.deployment.engine_version`` (SGLang and
    ``--kv-cache-memory``: none modelled, an empty list)."""
    d = e.deployment
    if not engine_of(d).logs_budget_lines or d.kv_cache_memory_bytes:
        return []
    style = value_at(BUDGET_LOG, d.engine_version, "v1")
    mml = e.max_model_len
    if style == "v0":
        def cat(name: str) -> int:
            return sum(c.bytes for c in r.components
                       if c.category == name and c.in_budget and c.profiled)

        util = d.gpu_memory_utilization or 0.0
        cpu_blocks = V0_SWAP_SPACE_BYTES // r.plan.block_bytes if r.plan.block_bytes else 0
        return [
            f"the current vLLM instance can use total_gpu_memory ({_gib(e.gpu.total_bytes)}GiB)"
            f" x gpu_memory_utilization ({util:.2f}) = {_gib(util * e.gpu.total_bytes)}GiB",
            f"model weights take {_gib(cat('weights'))}GiB; non_torch_memory takes "
            f"{_gib(cat('non_torch'))}GiB; PyTorch activation peak memory takes "
            f"{_gib(cat('activation'))}GiB; the rest of the memory reserved for KV Cache is "
            f"{_gib(r.available_kv_bytes)}GiB.",
            f"# cuda blocks: {r.kv.num_gpu_blocks}, # CPU blocks: {cpu_blocks}",
            f"Maximum concurrency for {mml} tokens per request: "
            f"{r.kv.num_gpu_blocks * r.plan.block_size / mml:.2f}x",
        ]
    lines = [] if style == "v1_no_budget" else [
        f"Available KV cache memory: {_gib(r.available_kv_bytes)} GiB"]
    return [*lines, f"GPU KV cache size: {r.kv.tokens:,} tokens",
            f"Maximum concurrency for {mml:,} tokens per request: {r.kv.max_concurrency:.2f}x"]
