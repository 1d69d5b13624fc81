"""``memprof explain``'s reporters: measured (as logged) vs estimated per figure, as a table
(80 columns) or as JSON."""

from __future__ import annotations

import io
import json
from typing import Any

from memprof.core.explain import Explanation, Row, show
from memprof.report.estimate_rows import headline

SHORT = {
    "weights_bytes": "model load", "non_torch_bytes": "non-torch",
    "activation_peak_bytes": "activation peak", "peak_torch_bytes": "peak torch",
    "total_gpu_bytes": "GPU total", "available_kv_bytes": "available KV",
    "cudagraph_estimate_bytes": "graph estimate", "cudagraph_pool_bytes": "graph pool",
    "num_gpu_blocks": "GPU blocks", "kv_tokens": "KV tokens", "max_concurrency": "concurrency",
    "estimated_max_model_len": "est. max len", "oom_total_bytes": "GPU total (OOM)",
    "avail_after_load_bytes": "free after load", "kv_cache_bytes": "KV size",
    "k_bytes": "K size", "v_bytes": "V size", "avail_after_pool_bytes": "free after KV",
    "max_total_num_tokens": "max tokens",
}


def _long(key: str) -> str:
    from memprof.probes.startup_log import LABELS as LOG_LABELS

    return LOG_LABELS.get(key, key)


def _label(key: str) -> str:
    return SHORT.get(key, key)


def _delta(r: Row) -> str:
    if r.delta is None:
        return "—"
    text = show(r.key, r.delta) if r.key.endswith("_bytes") else (
        f"{r.delta:+.2f}" if r.key == "max_concurrency" else f"{round(r.delta):+,}")
    if r.key.endswith("_bytes") and r.delta >= 0:
        text = "+" + text
    return text


def _pct(r: Row) -> str:
    pct = r.delta_pct
    if pct is None:
        return "—"
    return f"{pct:+.1f}%" if abs(pct) < 1000 else f"{pct / 100:+.0f}×"


def explanation_dict(x: Explanation, log: dict[str, Any]) -> dict[str, Any]:
    e = x.estimate
    return {
        "schema_version": 1,
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
                       "mem_fraction_static": e.mem_fraction_static},
        "verdict": e.verdict,
        "figures": [{"key": r.key, "label": _long(r.key), "measured": r.measured,
                     "estimated": r.estimated, "delta": r.delta, "delta_pct": r.delta_pct,
                     "reproduced": r.reproduced, "explanation": r.explanation}
                    for r in x.rows],
        "fixes": [{"change": f.change, "detail": f.detail} for f in (x.fixes or [])],
        "fixes_note": x.fixes.summary() if x.fixes is not None and x.fixes.tried else None,
        "engine_fix": x.engine_fix,
        "notes": list(x.notes),
    }


def render_explain_json(x: Explanation, log: dict[str, Any]) -> str:
    return json.dumps(explanation_dict(x, log), indent=2) + "\n"


def render_explain_table(x: Explanation, log: dict[str, Any], width: int | None = 80) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False)
    e = x.estimate
    what = " ".join(str(v) for v in (log.get("engine"), log.get("generation"),
                                     log.get("version")) if v)
    con.print(f"log: {log.get('path')} ({what or 'engine unknown'})")
    if log.get("error"):
        con.print(f"stopped by: {log['error'][:300]}")
    con.print("rebuilt: " + headline(e))
    t = Table(show_lines=False, expand=False, pad_edge=False)
    t.add_column("figure", no_wrap=True)
    t.add_column("logged", justify="right", no_wrap=True)
    t.add_column("memprof", justify="right", no_wrap=True)
    t.add_column("Δ", justify="right", no_wrap=True)
    t.add_column("Δ%", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    legend: list[str] = []
    for r in x.rows:
        mark = "ok" if r.reproduced else ""
        if r.explanation:
            if r.explanation not in legend:
                legend.append(r.explanation)
            mark = f"[{legend.index(r.explanation) + 1}]"
        t.add_row(_label(r.key), show(r.key, r.measured),
                  "—" if r.estimated is None else show(r.key, r.estimated), _delta(r), _pct(r),
                  mark)
    con.print(t)
    for i, text in enumerate(legend, 1):
        con.print(f"[{i}] {text}")
    con.print(f"memprof's verdict: {e.verdict}" + (" — " + "; ".join(e.reasons)
                                                   if e.reasons else ""))
    if x.engine_fix:
        con.print(f"the engine's own suggestion: {x.engine_fix}")
    if x.fixes is not None:
        if x.fixes.tried:
            con.print(x.fixes.summary())
        for f in x.fixes:
            con.print(f"  {f.change}: {f.detail}")
    for n in x.notes:
        con.print(f"note: {n}")
    return buf.getvalue()
