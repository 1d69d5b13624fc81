"""``Explanation`` (``memprof explain``) as table, JSON and Markdown.

Reporters of ``memprof explain`` (an ``Explanation`` and what the log said about itself):
measured (as logged) vs estimated per figure as a table (80 columns), JSON
(``memprof.core.explain.explanation_dict``, serialised) and Markdown (the table's rows)."""

from __future__ import annotations

import io
import json
from typing import Any

from memprof.core.explain import Explanation, Row, explanation_dict, show
from memprof.report.estimate_rows import headline

SHORT = {
    "weights_bytes": "model load", "non_torch_bytes": "non-torch",
    "activation_peak_bytes": "activation peak", "peak_torch_bytes": "peak torch",
    "total_gpu_bytes": "GPU total", "available_kv_bytes": "available KV",
    "cudagraph_estimate_bytes": "graph estimate", "cudagraph_pool_bytes": "graph pool",
    "num_gpu_blocks": "GPU blocks", "kv_tokens": "KV tokens", "max_concurrency": "concurrency",
    "estimated_max_model_len": "est. max len", "oom_total_bytes": "GPU total (OOM)",
    "avail_before_load_bytes": "free before load", "free_at_start_bytes": "free at start",
    "avail_after_load_bytes": "free after load", "kv_cache_bytes": "KV size",
    "k_bytes": "K size", "v_bytes": "V size", "avail_after_pool_bytes": "free after KV",
    "max_total_num_tokens": "max tokens", "requested_bytes": "requested",
    "num_cpu_blocks": "CPU blocks", "auto_fit_max_model_len": "fitted max len",
}


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


def render_explain_json(x: Explanation, log: dict[str, Any]) -> str:
    from memprof.probes.startup_log import LABELS as LOG_LABELS

    return json.dumps(explanation_dict(x, log, LOG_LABELS), indent=2) + "\n"


def render_explain_table(x: Explanation, log: dict[str, Any], width: int | None = 80) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False)
    con.print(f"log: {_what(log)}")
    if log.get("error"):
        con.print(f"stopped by: {log['error'][:300]}")
    con.print("rebuilt: " + headline(x.estimate))
    t = Table(show_lines=False, expand=False, pad_edge=False)
    t.add_column("figure", no_wrap=True)
    t.add_column("logged", justify="right", no_wrap=True)
    t.add_column("memprof", justify="right", no_wrap=True)
    t.add_column("Δ", justify="right", no_wrap=True)
    t.add_column("Δ%", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    cells, legend = _cells(x)
    for row in cells:
        t.add_row(*row)
    con.print(t)
    for line in _tail(x, legend):
        con.print(line)
    return buf.getvalue()


def _what(log: dict[str, Any]) -> str:
    what = " ".join(str(v) for v in (log.get("engine"), log.get("generation"),
                                     log.get("version")) if v)
    return f"{log.get('path')} ({what or 'engine unknown'})"


def _cells(x: Explanation) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table's rows (figure, logged, memprof, Δ, Δ%, mark) and the legend the marks number."""
    legend: list[str] = []
    rows: list[tuple[str, ...]] = []
    for r in x.rows:
        mark = "ok" if r.reproduced else ""
        if r.explanation:
            if r.explanation not in legend:
                legend.append(r.explanation)
            mark = f"[{legend.index(r.explanation) + 1}]"
        rows.append((_label(r.key), show(r.key, r.measured),
                     "—" if r.estimated is None else show(r.key, r.estimated), _delta(r),
                     _pct(r), mark))
    return rows, legend


def _tail(x: Explanation, legend: list[str]) -> list[str]:
    """The lines under the table: the legend, the verdict, the fixes, the notes."""
    e = x.estimate
    out = [f"[{i}] {text}" for i, text in enumerate(legend, 1)]
    out.append(f"memprof's verdict: {e.verdict}" + (" — " + "; ".join(e.reasons)
                                                    if e.reasons else ""))
    if x.engine_fix:
        out.append(f"the engine's own suggestion: {x.engine_fix}")
    if x.fixes is not None:
        if x.fixes.tried:
            out.append(x.fixes.summary())
        out += [f"  {f.change}: {f.detail}" for f in x.fixes]
    out += [f"note: {n}" for n in x.notes]
    return out


def _md(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def render_markdown(x: Explanation, log: dict[str, Any]) -> str:
    """The explanation as GitHub Markdown: the table's rows and the lines under it."""
    out = [f"### memprof explain: {_md(_what(log))}", ""]
    if log.get("error"):
        out += [f"stopped by: {_md(str(log['error'])[:300])}", ""]
    out += ["rebuilt: " + headline(x.estimate), "",
            "| figure | logged | memprof | Δ | Δ% | |", "|---|---:|---:|---:|---:|---|"]
    cells, legend = _cells(x)
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in cells]
    out.append("")
    out += [f"- {_md(line.strip())}" for line in _tail(x, legend)]
    return "\n".join(out) + "\n"
