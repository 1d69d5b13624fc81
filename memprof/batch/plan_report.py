"""What ``memprof plan`` reports: the layouts that hold a workload (``memprof.batch.plan``'s rows,
best first) with the serve command of each, and the JSON document built from them, here in the
core so the reporters only serialise it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memprof.core.engines import engine_of

if TYPE_CHECKING:
    from memprof.batch.plan import PlanRow


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanReport:
    """A plan: the workload asked (``requests`` at ``context`` tokens on ``gpu``), the rows shown
    (the best ``--top``), how many layouts hold it, and the model as the engine loads it
    (``served``, with a note when that differs from ``model``)."""

    model: str
    gpu: str
    requests: int
    context: int
    rows: tuple[PlanRow, ...]
    found: int
    served: str
    served_note: str | None = None
    kv_dtypes: tuple[str, ...] = ("auto", "fp8")  # the KV cache dtypes the layouts were tried at


def serve_command(r: PlanRow, model: str) -> str:
    """The serve command of a plan, to paste: ``model`` is what the engine loads
    (``memprof.batch.plan.serve_model``), shell-quoted."""
    c, d = r.candidate, r.deployment
    model = shlex.quote(model)
    parts = engine_of(d).serve_command(model, tp=c.tp, pp=c.pp, dp=c.dp, ep=c.ep,
                                       max_model_len=d.max_model_len,
                                       max_num_seqs=r.max_num_seqs)
    if c.kv_cache_dtype != "auto":
        parts.append(f"--kv-cache-dtype {c.kv_cache_dtype}")
    return " ".join(parts)


def plan_record(i: int, r: PlanRow, model: str) -> dict[str, Any]:
    """Row ``i`` (1 = best) of a plan as a JSON-able record; ``model`` as the engine loads it."""
    c = r.candidate
    return {"rank": i, "gpus": r.gpus, "tp": c.tp, "pp": c.pp, "dp": c.dp,
            "enable_expert_parallel": c.ep, "kv_cache_dtype": c.kv_cache_dtype,
            "max_num_seqs": r.max_num_seqs, "kv_cache_tokens": r.kv_cache_tokens,
            "total_kv_tokens": r.total_kv_tokens, "max_concurrency": round(r.max_concurrency, 4),
            "headroom_bytes": r.headroom_bytes, "command": serve_command(r, model)}


def plan_dict(p: PlanReport) -> dict[str, Any]:
    """The whole JSON document of ``memprof plan --format json`` (no ``schema_version``: the
    document predates it and is kept as it was)."""
    return {"model": p.model, "gpu": p.gpu, "requests": p.requests, "context": p.context,
            "plans": [plan_record(i, r, p.served) for i, r in enumerate(p.rows, 1)]}
