"""Two deployments side by side, and the remedies that turn an OOM into a fit.

``--compare scratch=shared`` re-estimates the same deployment with the given changes and diffs
the two component lists; a remedy is a change that memprof evaluated the same way, so every
suggestion comes with the number it gives.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from memprof.base.errors import BadInput
from memprof.base.units import fmt_bytes
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate

_ALIASES = {"tensor_parallel_size": "tp", "pipeline_parallel_size": "pp",
            "data_parallel_size": "dp", "kv_cache_memory": "kv_cache_memory_bytes"}


def parse_changes(text: str) -> dict[str, object]:
    """``"scratch=shared,tp=4"`` → typed Deployment field values (flag names also accepted)."""
    from memprof.base.units import parse_size

    fields = {f.name: f for f in dataclasses.fields(Deployment)}
    out: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise BadInput(f"cannot read the change {part!r}", hint="write KEY=VALUE, e.g. "
                           "scratch=shared or kv_cache_dtype=fp8")
        key, value = (x.strip() for x in part.split("=", 1))
        key = key.lstrip("-").replace("-", "_")
        key = _ALIASES.get(key, key)
        if key not in fields:
            raise BadInput(f"unknown deployment field {key!r} in --compare",
                           hint="use a memprof estimate flag name, e.g. scratch, tp, "
                           "kv_cache_dtype, max_num_seqs")
        current = getattr(Deployment(), key)
        typ = str(fields[key].type)
        try:
            if key == "kv_cache_memory_bytes":
                out[key] = parse_size(value)
            elif "bool" in typ:
                out[key] = value.lower() in ("1", "true", "yes", "on")
            elif "float" in typ:
                out[key] = float(value)
            elif "int" in typ:
                out[key] = int(value)
            else:
                out[key] = None if value.lower() in ("none", "default") else value
        except ValueError:
            raise BadInput(f"bad value {value!r} for {key}", hint=f"e.g. {key}={current}") from None
    return out


@dataclass(frozen=True, slots=True)
class DiffRow:
    rank: int
    component: str
    category: str
    a_bytes: int
    b_bytes: int

    @property
    def delta(self) -> int:
        return self.b_bytes - self.a_bytes


def diff(a: Estimate, b: Estimate) -> list[DiffRow]:
    """Per distinct rank (matched by position), every component whose bytes differ."""
    rows: list[DiffRow] = []
    for ra, rb in zip(a.ranks, b.ranks, strict=False):
        ca = {c.name: c for c in ra.components}
        cb = {c.name: c for c in rb.components}
        for name in dict.fromkeys([*ca, *cb]):
            x, y = ca.get(name), cb.get(name)
            xa, yb = (x.bytes if x else 0), (y.bytes if y else 0)
            either = x or y
            if xa != yb and either is not None:
                rows.append(DiffRow(ra.coord.rank, name, either.category, xa, yb))
    return rows


@dataclass(frozen=True, slots=True)
class Remedy:
    change: str  # the flags to add, as a user types them
    verdict: str
    kv_cache_tokens: int
    headroom_bytes: int
    detail: str


def _try(e: Estimate, model: str, changes: dict[str, object]) -> Estimate | None:
    try:
        return estimate(model, e.deployment.with_(**changes), gpu=e.gpu)
    except BadInput:
        return None


def _flag(changes: dict[str, object]) -> str:
    parts = []
    for k, v in changes.items():
        flag = {"tp": "-tp", "pp": "-pp", "dp": "-dp"}.get(k, "--" + k.replace("_", "-"))
        parts.append(flag if v is True else f"{flag} {v}")
    return " ".join(parts)


def remedies(e: Estimate, model: str, limit: int = 5) -> list[Remedy]:
    """Concrete changes that make the deployment fit (or fit better), each evaluated."""
    if e.verdict == "fits":
        return []
    dep = e.deployment
    candidates: list[dict[str, object]] = []
    has_per_layer = any("per layer" in c.name for r in e.ranks for c in r.components
                        if c.category == "scratch" and c.bytes > 0)
    if has_per_layer and dep.scratch != "shared":
        candidates.append({"scratch": "shared"})
    if dep.kv_cache_dtype == "auto":
        candidates.append({"kv_cache_dtype": "fp8"})
    if e.verdict == "runtime_oom":
        if any(c.category == "cudagraph" and c.where == "runtime" and c.bytes > 0
               for r in e.ranks for c in r.components):
            candidates.append({"enforce_eager": True})
        if not dep.sglang and not dep.kv_cache_memory_bytes:
            worst = min(r.headroom_bytes for r in e.ranks)
            util = (dep.gpu_memory_utilization * e.gpu.total_bytes + worst) / e.gpu.total_bytes
            util = int(util * 1000) / 1000
            if 0 < util < dep.gpu_memory_utilization:
                candidates.append({"gpu_memory_utilization": util})
        seqs = _largest_fitting_seqs(e, model)
        if seqs:
            candidates.append({"max_num_seqs": seqs})
    else:
        for factor in (2, 4, 8):
            if dep.tp * factor <= 64:
                candidates.append({"tp": dep.tp * factor})
        if e.quant is None:
            candidates.append({"quantization": "fp8"})
        est = min(r.estimated_max_model_len for r in e.ranks)
        if 0 < est < e.max_model_len:
            candidates.append({"max_model_len": est})
    out: list[Remedy] = []
    for ch in candidates:
        r = _try(e, model, ch)
        if r is None:
            continue
        detail = (f"KV cache {r.kv_cache_tokens:,} tokens, max concurrency "
                  f"{r.max_concurrency:.2f}x, headroom "
                  f"{fmt_bytes(min(x.headroom_bytes for x in r.ranks))}")
        headroom = min(x.headroom_bytes for x in r.ranks)
        out.append(Remedy(_flag(ch), r.verdict, r.kv_cache_tokens, headroom, detail))
    if e.verdict == "runtime_oom":  # fits first, then the most headroom
        out.sort(key=lambda x: (x.verdict != "fits", -x.headroom_bytes))
    else:  # fits first, then the most KV tokens
        out.sort(key=lambda x: (x.verdict != "fits", -x.kv_cache_tokens))
    return out[:limit]


def _largest_fitting_seqs(e: Estimate, model: str) -> int | None:
    lo, hi = 1, (e.deployment.max_num_seqs or 1) - 1
    if hi < 1:
        return None
    first = _try(e, model, {"max_num_seqs": lo})
    if first is None or first.verdict != "fits":
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        r = _try(e, model, {"max_num_seqs": mid})
        if r is not None and r.verdict == "fits":
            lo = mid
        else:
            hi = mid - 1
    return lo
