"""Measured vs estimated: the figures a start-up log printed, each beside memprof's estimate of
the same quantity, the difference, and what explains it.

The measured figures come in as plain numbers keyed by name (``memprof.probes.startup_log`` reads
them from a log), so this module knows nothing of log formats. "What explains it" is tested, not
asserted: memprof re-estimates the deployment under each hypothesis it models (per-layer scratch,
the utilisation default of older vLLM releases, an fp8 KV cache, eager mode, ...) and names the
one that brings the figure within tolerance; a difference no hypothesis explains says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memprof.base.errors import BadInput
from memprof.base.units import GiB, fmt_bytes
from memprof.core import kv_dtypes
from memprof.core.contract import feature_fields
from memprof.core.deployment import Deployment
from memprof.core.engine_log import V0_SWAP_SPACE_BYTES
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, RankEstimate, estimate, load_figure
from memprof.core.gpus import GPU
from memprof.core.graph_log import logged_graph
from memprof.core.models import ModelSpec
from memprof.core.remedies import Remedies, remedies
from memprof.core.terms.cudagraph import PREFILL_GRAPHS
from memprof.core.terms.request_table import pool_table_bytes
from memprof.core.verdict import loaded_at_start

# A figure is "reproduced" within this relative difference (or this many bytes, for small ones).
TOLERANCE = 0.03
TOLERANCE_BYTES = 16 << 20

# the utilisation default before vLLM PR #38284 raised it to 0.92
OLD_UTILISATION = 0.9


def _comp(r: RankEstimate, pred: Callable[[str, str], bool]) -> int:
    return sum(c.bytes for c in r.components if pred(c.category, c.where))


def _loaded(r: RankEstimate) -> int:
    return sum(c.bytes for c in r.components if loaded_at_start(c))


def _logged_graph(e: Estimate, r: RankEstimate) -> int:
    g = logged_graph(e, r)
    if g is not None:
        return g.total
    # an engine's own decode graphs: its prefill graphs print a line of their own
    return sum(c.bytes for c in r.components
               if c.category == "cudagraph" and c.name != PREFILL_GRAPHS)


def _baseline(r: RankEstimate) -> int:
    return _comp(r, lambda cat, where: where == "baseline")


# measured key → (what memprof estimates for it, on the rank with the most weights)
ESTIMATED: dict[str, Callable[[Estimate, RankEstimate], float]] = {
    # the engine's load figure: vLLM's torch allocations, SGLang's drop in free memory
    # (``Engine.load_figure``)
    "weights_bytes": lambda e, r: load_figure(e, r),
    # the engine's non-torch figure is device memory in use less torch's allocations, so the
    # allocator's free blocks a release charges in the budget (0.6.x, 0.8.x:
    # ``memprof.core.terms.reserved_charge``) are in it
    "non_torch_bytes": lambda e, r: _comp(
        r, lambda c, w: c in ("non_torch", "allocator") and w == "budget"),
    # the budget's activation: not Model Runner V2's sampler state where the release's budget
    # line does not see it (before 0.27.0: vllm_runner.V2_SAMPLER_STATE_CHARGED, "runtime")
    "activation_peak_bytes": lambda e, r: _comp(
        r, lambda c, w: c == "activation" and w == "budget"),
    "peak_torch_bytes": lambda e, r: _loaded(r) + _comp(r, lambda c, w: c == "activation"),
    "cudagraph_estimate_bytes": lambda e, r: _comp(
        r, lambda c, w: c == "cudagraph" and w == "budget"),
    # "Graph capturing finished ... took X GiB": a free-memory delta, as memprof.core.graph_log
    # predicts it at the release (the cudagraph category where the engine logs no such delta)
    "cudagraph_pool_bytes": lambda e, r: _logged_graph(e, r),
    "available_kv_bytes": lambda e, r: r.available_kv_bytes,
    "kv_cache_bytes": lambda e, r: r.kv.kv_cache_bytes,
    "k_bytes": lambda e, r: r.kv.kv_cache_bytes / 2,
    "v_bytes": lambda e, r: r.kv.kv_cache_bytes / 2,
    "num_gpu_blocks": lambda e, r: r.kv.num_gpu_blocks,
    # V0's "# CPU blocks": swap_space (4 GiB by default) / one block's bytes (worker.py
    # determine_num_available_blocks; memprof.core.engine_log.V0_SWAP_SPACE_BYTES)
    "num_cpu_blocks": lambda e, r: (V0_SWAP_SPACE_BYTES // r.plan.block_bytes
                                    if r.plan.block_bytes else 0),
    "requested_bytes": lambda e, r: r.requested_bytes,
    "kv_tokens": lambda e, r: e.kv_cache_tokens,
    "max_total_num_tokens": lambda e, r: e.kv_cache_tokens,
    "max_concurrency": lambda e, r: e.max_concurrency,
    "estimated_max_model_len": lambda e, r: min(x.estimated_max_model_len for x in e.ranks),
    # --max-model-len auto: the length fitted after profiling (memprof.core.auto_fit)
    "auto_fit_max_model_len": lambda e, r: e.max_model_len,
    "total_gpu_bytes": lambda e, r: e.gpu.total_bytes,
    "oom_total_bytes": lambda e, r: e.gpu.total_bytes,
    "avail_before_load_bytes": lambda e, r: e.gpu.total_bytes - _baseline(r),
    "free_at_start_bytes": lambda e, r: e.gpu.total_bytes - _baseline(r),
    "avail_after_load_bytes": lambda e, r: e.gpu.total_bytes - _baseline(r) - load_figure(e, r),
    # "Memory pool end": after the KV pool and the table allocated beside it (SGLang's
    # request-to-token table, terms/request_table.py)
    "avail_after_pool_bytes": lambda e, r: (e.gpu.total_bytes - _baseline(r)
                                            - load_figure(e, r) - r.kv.kv_cache_bytes
                                            - pool_table_bytes(r.components)),
}

# why a figure may differ, when no modelled setting explains it (facts about the engines only)
WHY = {
    "non_torch_bytes": "an NCCL communicator's size varies with the transport, the NCCL "
                       "version and its cuMem setting (memprof's were measured with NCCL 2.28.9 "
                       "on H100/H200), and kernel modules memprof has no entry for load here",
    "activation_peak_bytes": "memprof models the profile run's largest live set per layer; "
                             "kernel workspaces it has no entry for land here",
    "weights_bytes": "checkpoint tensors or buffers registered at load that memprof does not "
                     "know (a fork's kernels, extra heads)",
    "available_kv_bytes": "follows from the terms above (budget − load − activations − "
                          "non-torch − graphs)",
    "kv_tokens": "follows from the available KV memory and the block layout",
    "num_gpu_blocks": "follows from the available KV memory and the block layout",
    "num_cpu_blocks": "--swap-space (4 GiB by default) over one block's bytes: a --swap-space "
                      "the log does not show",
    "requested_bytes": "gpu_memory_utilization × the GPU's total: a total or utilisation "
                       "other than memprof's",
    "max_concurrency": "follows from the KV tokens",
    "kv_cache_bytes": "follows from the KV tokens",
    "k_bytes": "follows from the KV tokens",
    "v_bytes": "follows from the KV tokens",
    "max_total_num_tokens": "follows from the available KV memory",
    "avail_before_load_bytes": "memory held before the engine loads (the CUDA context, NCCL, "
                               "other processes on the GPU, a desktop's display)",
    "free_at_start_bytes": "memory held before the engine's snapshot (the CUDA context, NCCL, "
                           "other processes on the GPU, a desktop's display)",
}

# The engines print free memory in GiB with two decimals (SGLang ``{:.2f}`` of bytes / 2**30,
# vLLM ``round(b / GiB, 2)``): a figure read from a log, or the sum of two, is within this of
# the bytes it stood for.
LOG_ROUNDING_BYTES = 2 * (GiB // 200)
# figures of the free memory when the engine looked, before it loaded anything: SGLang's "Load
# weight begin. avail mem" (ModelRunner.load_model; the pool is a fraction of it) and vLLM's
# init snapshot in "Free memory on device (X/Y GiB) on startup" (V1 from 0.9.1)
FREE_BEFORE_KEYS = ("avail_before_load_bytes", "free_at_start_bytes")


def with_derived(measured: Mapping[str, float]) -> tuple[dict[str, float], list[str]]:
    """The figures, with those a log states only through two others: the free memory before
    load as the free memory after it plus the load's drop (a log cut before "Load weight
    begin"), and the load's drop as free before minus free after (SGLang 0.4.3 prints no "mem
    usage": ``SGLANG_LOAD_FIGURE`` in memprof/core/engines/sglang.py); with a note for each."""
    out = dict(measured)
    notes: list[str] = []
    before = out.get("avail_before_load_bytes")
    after = out.get("avail_after_load_bytes")
    load = out.get("weights_bytes")
    if before is None and after is not None and load is not None:
        out["avail_before_load_bytes"] = after + load
        notes.append(f"free before load {fmt_bytes(after + load)}: the log's free memory after "
                     f"load ({fmt_bytes(after)}) plus its load ({fmt_bytes(load)})")
    elif load is None and before is not None and after is not None:
        out["weights_bytes"] = before - after
        notes.append(f"model load {fmt_bytes(before - after)}: the log's free memory before "
                     f"load ({fmt_bytes(before)}) minus after it ({fmt_bytes(after)})")
    return out, notes


def in_use_from_log(measured: Mapping[str, float], e: Estimate) -> tuple[int, str] | None:
    """Memory other processes held, as the log shows it: where the log's free memory before
    the engine loaded (``FREE_BEFORE_KEYS``) is below the GPU's total less what memprof puts
    there (the CUDA context, the communicators made before it) by more than the log's
    rounding, the difference, and the note saying so (None otherwise); a log without a free
    figure before load but with torch's OOM message, what the message leaves to other processes
    (``_in_use_at_oom``). An input read from the log, stated, never a fit: it is what
    ``--gpu-memory-in-use`` would say."""
    r = logged_rank(measured, e)
    ours = e.gpu.total_bytes - _baseline(r)
    if not any(k in measured for k in FREE_BEFORE_KEYS):
        return _in_use_at_oom(measured)
    for key in FREE_BEFORE_KEYS:
        logged = measured.get(key)
        if logged is None:
            continue
        gap = int(ours - logged)
        if gap <= LOG_ROUNDING_BYTES:
            return None
        return gap, (f"the log shows {fmt_bytes(logged)} free before the engine loads, "
                     f"{fmt_bytes(gap)} less than the GPU's {fmt_bytes(e.gpu.total_bytes)} "
                     f"after memprof's CUDA context and communicators ({fmt_bytes(ours)}): taken "
                     f"as memory held by other processes, or by a larger context or "
                     f"communicators than memprof's (--gpu-memory-in-use "
                     f"{round(gap / (1 << 20))}MiB; pass --gpu-memory-in-use 0 to compare "
                     "without it)")
    return None


OOM_KEYS = ("oom_total_bytes", "oom_free_bytes", "oom_process_bytes")
OOM_CONTEXT_KEYS = frozenset(OOM_KEYS[1:])  # the total is compared with the GPU's


def _in_use_at_oom(measured: Mapping[str, float]) -> tuple[int, str] | None:
    """Memory the rest of the card held when the engine ran out, from torch's OOM message
    ("GPU 0 has a total capacity of T of which F is free. ... Including non-PyTorch memory, this
    process has P memory in use"; c10/cuda/CUDACachingAllocator.cpp): ``T − F − P``, where that
    is more than the three figures' rounding; with the note saying so. The message lists only
    the compute processes NVML reports, so a display's graphics clients show only in this
    difference. Taken as held from the engine's start (an assumption the note states: the log
    prints no free memory before load); None without the three figures."""
    if not all(k in measured for k in OOM_KEYS):
        return None
    total, free, process = (measured[k] for k in OOM_KEYS)
    held = int(total - free - process)
    if held <= LOG_ROUNDING_BYTES:
        return None
    return held, (f"the log's OOM line leaves {fmt_bytes(held)} of the card's {fmt_bytes(total)} "
                  f"to other processes (total − {fmt_bytes(free)} free − {fmt_bytes(process)} "
                  "this process): taken as held since before the engine started, which the log "
                  f"does not show (--gpu-memory-in-use {round(held / (1 << 20))}MiB; pass "
                  "--gpu-memory-in-use 0 to compare without it)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One figure: measured (as logged), memprof's estimate, the difference, and what explains
    it. Sizes in bytes; counts and ratios as numbers."""

    key: str
    measured: float
    estimated: float | None
    explanation: str = ""
    reproduced: bool = False

    @property
    def delta(self) -> float | None:
        return None if self.estimated is None else self.estimated - self.measured

    @property
    def delta_pct(self) -> float | None:
        if self.estimated is None or not self.measured:
            return None
        return 100.0 * (self.estimated - self.measured) / self.measured


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    estimate: Estimate
    rows: tuple[Row, ...]
    fixes: Remedies | None  # the cheapest changes that make it start (None: it starts)
    engine_fix: str | None  # what the engine's own error suggests (e.g. --max-model-len N)
    notes: tuple[str, ...] = ()


def _close(key: str, measured: float, estimated: float) -> bool:
    if key.endswith("_bytes"):
        return abs(estimated - measured) <= max(TOLERANCE * abs(measured), TOLERANCE_BYTES)
    return abs(estimated - measured) <= TOLERANCE * abs(measured) + 1e-9


def logged_rank(measured: Mapping[str, float], e: Estimate) -> RankEstimate:
    """The rank a log's figures are compared with: the one with the most weights (the lowest
    rank on a tie). A budget line comes from one worker, and under vLLM V0 only TP rank 0
    samples in the profile run (``V0_DRIVER_SAMPLER``): where ranks with those weights differ in
    their activation peak, the one whose peak is nearest the logged peak is that worker."""
    top = max(r.weights_bytes for r in e.ranks)
    same = sorted((r for r in e.ranks if r.weights_bytes == top), key=lambda x: x.coord.rank)
    act = measured.get("activation_peak_bytes")
    if act is None or len(same) == 1:
        return same[0]
    return min(same, key=lambda x: abs(ESTIMATED["activation_peak_bytes"](e, x) - act))


def _rows(measured: Mapping[str, float], e: Estimate) -> list[Row]:
    r = logged_rank(measured, e)
    out = []
    for key, value in measured.items():
        if key in OOM_CONTEXT_KEYS:  # inputs of ``_in_use_at_oom``, not figures to compare
            continue
        fn = ESTIMATED.get(key)
        est = float(fn(e, r)) if fn else None
        out.append(Row(key=key, measured=value, estimated=est,
                       reproduced=est is not None and _close(key, value, est)))
    return out


def hypotheses(e: Estimate, given: set[str]) -> list[tuple[str, dict[str, object]]]:
    """Settings memprof models that may explain a difference, each as (why, changes); a
    setting the log states (``given``) is never questioned."""
    dep = e.deployment
    out: list[tuple[str, dict[str, object]]] = []
    has_scratch = any(r.scratch_savings for r in e.ranks)
    if has_scratch and dep.scratch != "per-layer":
        out.append(("per-layer decode scratch (engines before the shared-workspace fixes; "
                    "registered at load, or not seen by the profiler)", {"scratch": "per-layer"}))
    engine = engine_of(dep)
    if engine.budget_by_utilization and "gpu_memory_utilization" not in given:
        out.append((f"gpu_memory_utilization {OLD_UTILISATION} (vLLM's default before #38284)",
                    {"gpu_memory_utilization": OLD_UTILISATION}))
    if dep.kv_cache_dtype == kv_dtypes.DEFAULT and "kv_cache_dtype" not in given:
        out.append(("an fp8 KV cache", {"kv_cache_dtype": kv_dtypes.FP8}))
    if "enforce_eager" not in given:
        out.append(("eager mode (no CUDA graphs)" if not dep.enforce_eager else "CUDA graphs on",
                    {"enforce_eager": not dep.enforce_eager}))
    if "max_num_seqs" not in given and engine.tiered_max_num_seqs:
        out.append(("max_num_seqs 256 (vLLM's default on smaller GPUs and in V0)",
                    {"max_num_seqs": 256}))
    return out


def explain(measured: Mapping[str, float], model: str | ModelSpec, dep: Deployment, gpu: GPU,
            *, given: set[str], failed: bool, engine_fix: str | None = None) -> Explanation:
    """Estimate the deployment a log describes and set every logged figure beside memprof's.

    ``given``: the settings the log states (never questioned by a hypothesis); ``failed``: the
    log ends in an error (then the cheapest changes that make it start are evaluated). Where
    the log's free memory before load is below memprof's (``in_use_from_log``) and
    ``gpu_memory_in_use`` is not given, the difference is taken as memory other processes held,
    and the notes say so."""
    measured, notes = with_derived(measured)
    e = estimate(model, dep, gpu=gpu)
    took = None if "gpu_memory_in_use" in given else in_use_from_log(measured, e)
    if took is not None:
        e = estimate(model, dep.with_(gpu_memory_in_use=took[0]), gpu=gpu)
        notes.append(took[1])
        given = given | {"gpu_memory_in_use"}
    rows = _rows(measured, e)
    open_rows = [x for x in rows if x.estimated is not None and not x.reproduced]
    if open_rows:
        tried: list[tuple[str, dict[str, Row]]] = []
        for why, changes in hypotheses(e, given):
            try:
                alt = estimate(model, e.deployment.with_(**changes), gpu=gpu)
            except BadInput:
                continue
            tried.append((why, {x.key: x for x in _rows(measured, alt)}))
        rows = [_explained(x, tried) for x in rows]
    rows = [x if x.explanation or x.reproduced or x.estimated is None
            else Row(key=x.key, measured=x.measured, estimated=x.estimated,
                     explanation=WHY.get(x.key, "not explained by a setting memprof models"))
            for x in rows]
    fixes = None
    if failed or e.verdict != "fits":
        fixes = remedies(e, model)
    if failed and e.verdict == "fits":
        notes.append("the log ends in an error but memprof predicts this deployment fits: "
                     "the log's engine used memory memprof does not model (see the differences)")
    if not failed and e.verdict != "fits" and measured:
        notes.append(f"the log shows a start, memprof predicts {e.verdict}")
    return Explanation(estimate=e, rows=tuple(rows), fixes=fixes, engine_fix=engine_fix,
                       notes=tuple(notes))


def _explained(row: Row, tried: list[tuple[str, dict[str, Row]]]) -> Row:
    if row.reproduced or row.estimated is None:
        return row
    best: tuple[float, str, Row] | None = None
    for why, alt_rows in tried:
        alt = alt_rows.get(row.key)
        if alt is None or alt.estimated is None:
            continue
        gap = abs(alt.estimated - row.measured)
        if alt.reproduced and (best is None or gap < best[0]):
            best = (gap, why, alt)
    if best is None:
        return row
    _, why, alt = best
    return Row(key=row.key, measured=row.measured, estimated=row.estimated,
               explanation=f"reproduced with {why}: {show(row.key, alt.estimated or 0.0)}")


def show(key: str, value: float) -> str:
    """A figure as a person reads it."""
    if key.endswith("_bytes"):
        return fmt_bytes(value)
    if key in ("max_concurrency", "gpu_memory_utilization", "mem_fraction_static"):
        return f"{value:.2f}"
    return f"{round(value):,}"


__all__ = ["ESTIMATED", "Explanation", "GiB", "Row", "explain", "show"]


EXPLAIN_SCHEMA_VERSION = 1


def explanation_dict(x: Explanation, log: dict[str, Any],
                     labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON document (``schema_version`` 1) of ``memprof explain --format json``: ``log``
    (what the log said about itself: path, engine, release, error, notes) as given, the rebuilt
    deployment, and every figure measured vs estimated. ``labels`` names a figure's key as the
    log parser does (``memprof.probes.startup_log.LABELS``; the key itself where absent)."""
    e = x.estimate
    names = labels or {}
    return {
        "schema_version": EXPLAIN_SCHEMA_VERSION,
        "log": log,
        "deployment": {"model": e.spec.name, "engine": e.deployment.engine,
                       "engine_version": e.deployment.engine_version,
                       "tensor_parallel_size": e.deployment.tp,
                       "pipeline_parallel_size": e.deployment.pp,
                       "data_parallel_size": e.deployment.dp, "gpu": e.gpu.name,
                       "gpu_total_bytes": e.gpu.total_bytes, "max_model_len": e.max_model_len,
                       "max_num_seqs": e.deployment.max_num_seqs,
                       "kv_cache_dtype": e.deployment.kv_cache_dtype,
                       "gpu_memory_utilization": e.deployment.gpu_memory_utilization,
                       "mem_fraction_static": e.mem_fraction_static,
                       # what the rebuild's headline names beside these, where it is on
                       **({"num_speculative_tokens": e.deployment.num_speculative_tokens}
                          if e.deployment.num_speculative_tokens else {}),
                       **feature_fields(e.deployment)},
        "verdict": e.verdict,
        "figures": [{"key": r.key, "label": names.get(r.key, r.key), "measured": r.measured,
                     "estimated": r.estimated, "delta": r.delta, "delta_pct": r.delta_pct,
                     "reproduced": r.reproduced, "explanation": r.explanation}
                    for r in x.rows],
        "fixes": [{"change": f.change, "detail": f.detail} for f in (x.fixes or [])],
        "fixes_note": x.fixes.summary() if x.fixes is not None and x.fixes.tried else None,
        "engine_fix": x.engine_fix,
        "notes": list(x.notes),
    }
