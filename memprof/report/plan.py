"""``PlanReport`` (``memprof plan``) as table, JSON and Markdown.

Reporters of ``memprof plan`` (``memprof.batch.plan_report.PlanReport``): a table readable at 80
columns with the best layout's serve command under it, JSON (``plan_dict``, serialised) and
Markdown (the table's rows and the command)."""

from __future__ import annotations

import json
from typing import Any

from memprof.batch.plan_report import PlanReport, plan_dict, plan_record

COLUMNS = ["rank", "gpus", "layout", "kv_cache_dtype", "max_num_seqs", "total_kv_tokens",
           "max_concurrency", "headroom_bytes"]
def none_hint(p: PlanReport) -> str:
    """The way out when no layout holds the workload: an fp8 KV cache only where the layouts
    were not already tried at one (the default tries auto and fp8)."""
    fp8 = any(k.startswith("fp8") for k in p.kv_dtypes)
    return ("hint: raise --max-gpus, " + ("" if fp8 else "add --kv-cache-dtype fp8, ")
            + "or lower --requests / --context")


def _title(p: PlanReport) -> str:
    holds = f"{p.found} layouts hold it" if p.rows else "no layout holds it"
    return f"{p.model} on {p.gpu}: {p.requests:,} requests × {p.context:,} tokens — {holds}"


def _records(p: PlanReport) -> list[dict[str, Any]]:
    recs = []
    for i, r in enumerate(p.rows, 1):
        d = plan_record(i, r, p.served)
        d["layout"] = r.layout
        recs.append(d)
    return recs


def render_json(p: PlanReport) -> str:
    return json.dumps(plan_dict(p), indent=2) + "\n"


def render_table(p: PlanReport, width: int | None = 80) -> str:
    """The plan as plain text in ``width`` cells (``None``: the terminal's), as ``memprof.report
    .sweep.render_table`` lays out a table; pandas is imported here."""
    if not p.rows:
        return _title(p) + "\n" + none_hint(p) + "\n"
    from memprof.report.sweep import dataframe
    from memprof.report.sweep import render_table as table

    recs = _records(p)
    out = table(dataframe(recs), COLUMNS, title=_title(p), width=width)
    out += f"best: {recs[0]['command']}\n"
    if p.served_note:
        out += f"  ({p.served_note})\n"
    return out


def render_markdown(p: PlanReport) -> str:
    """The plan as GitHub Markdown: the table's rows, then the best layout's command."""
    from memprof.report.sweep import _cell, header

    out = [f"### memprof plan: {_title(p)}", ""]
    if not p.rows:
        return "\n".join([*out, none_hint(p).removeprefix("hint: ").capitalize() + "."]) + "\n"
    out += ["| " + " | ".join(header(c) for c in COLUMNS) + " |",
            "|" + "|".join("---" if c in ("layout", "kv_cache_dtype") else "---:"
                           for c in COLUMNS) + "|"]
    recs = _records(p)
    out += ["| " + " | ".join(_cell(c, r[c]) for c in COLUMNS) + " |" for r in recs]
    out += ["", f"best: `{recs[0]['command']}`"]
    if p.served_note:
        out.append(f"_({p.served_note})_")
    return "\n".join(out) + "\n"
