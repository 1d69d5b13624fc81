"""Remedies: changes that turn an OOM into a fit, each evaluated as an estimate, so every
suggestion comes with the KV tokens, GPUs and headroom it gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from memprof.base.errors import BadInput
from memprof.base.units import GiB, fmt_bytes
from memprof.core import kv_dtypes
from memprof.core.engines import engine_of
from memprof.core.estimate import Estimate, estimate
from memprof.core.flags import flag_name
from memprof.core.models import ModelSpec

MIN_REMEDY_HEADROOM_BYTES = GiB
"""A remedy is offered only when the changed deployment fits with at least this much headroom:
room for what memprof does not model (fragmentation beyond KV rounding, run-time peaks above the
profile run). vLLM's own post-capture suggestion keeps 150 MiB (vLLM@52a31cc gpu_worker.py
determine_available_memory); memprof asks
for more because a remedy is advice to act on."""


class Remedy(NamedTuple):
    """One evaluated change: the flags to add, the verdict and KV tokens it gives, its headroom
    (bytes) and the GPUs it uses."""

    change: str  # the flags to add, as a user types them
    verdict: str
    kv_cache_tokens: int
    headroom_bytes: int
    detail: str
    gpus: int = 1  # GPUs the changed deployment uses
    same_gpus: bool = True  # False: it needs more GPUs than the deployment has


@dataclass(frozen=True, slots=True)
class Remedies:
    """What memprof tried, cheapest first, and those that fit with the minimum headroom."""

    fitting: tuple[Remedy, ...]
    tried: tuple[str, ...]
    min_headroom_bytes: int = MIN_REMEDY_HEADROOM_BYTES

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.fitting)

    def __len__(self) -> int:
        return len(self.fitting)

    def __getitem__(self, i: int) -> Remedy:
        return self.fitting[i]

    def summary(self) -> str:
        floor = fmt_bytes(self.min_headroom_bytes)
        if self.fitting:
            return f"remedies that fit with at least {floor} of headroom, cheapest first:"
        if not self.tried:
            return ""
        return (f"none of these fit with at least {floor} of headroom: "
                + "; ".join(self.tried))


def _try(e: Estimate, model: str | ModelSpec, changes: dict[str, object]) -> Estimate | None:
    try:
        return estimate(model, e.deployment.with_(**changes), gpu=e.gpu)
    except BadInput:
        return None


def _flag(changes: dict[str, object], engine: str = "vllm") -> str:
    parts = []
    for k, v in changes.items():
        flag = flag_name(k, engine)
        flag = {"--tensor-parallel-size": "-tp", "--pipeline-parallel-size": "-pp",
                "--data-parallel-size": "-dp"}.get(flag, flag)
        parts.append(flag if v is True else f"{flag} {v}")
    return " ".join(parts)


def _headroom(r: Estimate) -> int:
    return min(x.headroom_bytes for x in r.ranks)


def _same_gpu_candidates(e: Estimate, model: str | ModelSpec,
                         min_headroom: int) -> list[dict[str, object]]:
    """Changes on the same GPUs, cheapest first: share scratch (no loss), a shorter context, an
    fp8 KV cache, a lower or higher utilisation, fewer sequences, no CUDA graphs, fp8 weights."""
    dep = e.deployment
    out: list[dict[str, object]] = []
    has_per_layer = any("per layer" in c.name for r in e.ranks for c in r.components
                        if c.category == "scratch" and c.bytes > 0)
    if has_per_layer and dep.scratch != "shared":
        out.append({"scratch": "shared"})
    est = min(r.estimated_max_model_len for r in e.ranks)
    if 0 < est < e.max_model_len:
        out.append({"max_model_len": est})
    if dep.kv_cache_dtype == kv_dtypes.DEFAULT:
        out.append({"kv_cache_dtype": kv_dtypes.FP8})
    if (engine_of(dep).budget_by_utilization and not dep.kv_cache_memory_bytes
            and dep.gpu_memory_utilization):
        # the utilisation that leaves exactly the minimum headroom: lower when what the engine
        # does not budget needs room, higher when the budget is too small for the KV cache
        total = e.gpu.total_bytes
        util = (dep.gpu_memory_utilization * total + _headroom(e) - min_headroom) / total
        util = int(util * 1000) / 1000
        if 0 < util <= 1.0 and util != dep.gpu_memory_utilization:
            out.append({"gpu_memory_utilization": util})
    if e.verdict == "runtime_oom":
        seqs = _largest_fitting_seqs(e, model, min_headroom)
        if seqs:
            out.append({"max_num_seqs": seqs})
        if any(c.category == "cudagraph" and c.where == "runtime" and c.bytes > 0
               for r in e.ranks for c in r.components):
            out.append({"enforce_eager": True})
    if e.quant is None:
        out.append({"quantization": "fp8"})
    return out


def _more_gpu_candidates(e: Estimate) -> list[dict[str, object]]:
    """Layouts with more GPUs: TP ×2/×4/×8 (within one 8-GPU node where possible), PP ×2/×4."""
    dep = e.deployment
    out: list[dict[str, object]] = []
    for factor in (2, 4, 8):
        if dep.tp * factor <= 64:
            out.append({"tp": dep.tp * factor})
    for factor in (2, 4):
        if dep.pp * factor <= e.spec.num_layers:
            out.append({"pp": dep.pp * factor})
    return out


# how many times a utilisation that leaves less than the minimum headroom is lowered again
UTIL_REFINEMENTS = 3


def remedies(e: Estimate, model: str | ModelSpec, limit: int = 5,
             min_headroom: int = MIN_REMEDY_HEADROOM_BYTES) -> Remedies:
    """Concrete changes that make the deployment fit, each evaluated: only those that fit with
    at least ``min_headroom`` are offered, same-GPU changes first (in the order of
    ``_same_gpu_candidates``), then layouts with more GPUs, fewest GPUs first. A layout that
    starts but cannot hold one ``max_model_len`` request is retried with the longest length it
    holds."""
    if e.verdict == "fits" and _headroom(e) >= min_headroom:
        return Remedies(fitting=(), tried=())
    same = _same_gpu_candidates(e, model, min_headroom)
    more = _more_gpu_candidates(e)
    fitting: list[tuple[int, int, int, Remedy]] = []
    tried: list[str] = []
    world = e.deployment.world_size
    for rank_order, ch in enumerate([*same, *more]):
        r = _try(e, model, ch)
        util = ch.get("gpu_memory_utilization")
        for _ in range(UTIL_REFINEMENTS):  # headroom is not linear in the utilisation (the
            # allocator's simulated slack moves with the KV cache): lower it by the shortfall
            if r is None or r.verdict != "fits" or _headroom(r) >= min_headroom or \
                    not isinstance(util, float):
                break
            lower = int((util - (min_headroom - _headroom(r)) / e.gpu.total_bytes) * 1000) / 1000
            util = lower if lower < util else round(util - 0.001, 3)
            if util <= 0:
                break
            ch = {"gpu_memory_utilization": util}
            r = _try(e, model, ch)
        if r is not None and r.verdict == "startup_oom" and ("tp" in ch or "pp" in ch):
            est = min(x.estimated_max_model_len for x in r.ranks)
            if 0 < est < r.max_model_len:
                ch = {**ch, "max_model_len": est}
                r = _try(e, model, ch)
        change = _flag(ch, e.deployment.engine)
        tried.append(change)
        if r is None or r.verdict != "fits" or _headroom(r) < min_headroom:
            continue
        gpus = r.deployment.world_size
        detail = (f"{gpus} GPU{'s' if gpus != 1 else ''}, KV cache {r.kv_cache_tokens:,} tokens, "
                  f"max concurrency {r.max_concurrency:.2f}x, headroom "
                  f"{fmt_bytes(_headroom(r))}")
        rem = Remedy(change, r.verdict, r.kv_cache_tokens, _headroom(r), detail, gpus,
                     gpus <= world)
        fitting.append((0 if gpus <= world else 1, gpus if gpus > world else 0, rank_order, rem))
    fitting.sort(key=lambda x: x[:3])
    return Remedies(fitting=tuple(x[3] for x in fitting[:limit]), tried=tuple(tried),
                    min_headroom_bytes=min_headroom)


def _largest_fitting_seqs(e: Estimate, model: str | ModelSpec, min_headroom: int) -> int | None:
    lo, hi = 1, (e.deployment.max_num_seqs or 1) - 1
    if hi < 1:
        return None

    def ok(seqs: int) -> bool:
        r = _try(e, model, {"max_num_seqs": seqs})
        return r is not None and r.verdict == "fits" and _headroom(r) >= min_headroom

    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
