"""``EstimateReport`` (``memprof estimate``) as Markdown.

The ``markdown`` reporter: an estimate as GitHub Markdown, the same rows as the table."""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.contract import EstimateReport
from memprof.report.estimate_rows import (
    NO_COMPONENT_CHANGES,
    budget_lines,
    compare_rows,
    compare_title,
    headline,
    rank_title,
    remedy_lines,
    rows,
    verdict_line,
)


def render_markdown(report: EstimateReport, width: int | None = None) -> str:
    """The estimate as GitHub Markdown (for a PR comment); ``width`` does not apply."""
    del width
    e, remedies, other, changes = report.estimate, report.remedies, report.other, report.changes
    out = [f"### memprof estimate: {e.spec.name}", "", headline(e), ""]
    for r in e.ranks:
        out += [f"#### {rank_title(r)}", "",
                "| component | category | count × each | total | % GPU | profiled |",
                "|---|---|---:|---:|---:|:---:|"]
        for row in rows(e, r):
            out.append(f"| {row.component} | {row.category} | {row.each} | {row.total} | "
                       f"{row.share} | {row.profiled} |")
        out += [""] + [f"- {line}" for line in budget_lines(e, r)] + [""]
    out.append(f"**{verdict_line(e)}**")
    out += [f"- {line}" for line in remedy_lines(remedies)]
    diffs = compare_rows(e, other) if other is not None else []
    if other is not None and not diffs:
        out += ["", f"#### {compare_title(e, other, changes)}", "", NO_COMPONENT_CHANGES]
    elif other is not None:
        out += ["", f"#### {compare_title(e, other, changes)}", "",
                "| rank | component | category | now | compare | Δ |",
                "|---:|---|---|---:|---:|---:|"]
        out += [f"| {x.rank} | {x.component} | {x.category} | {fmt_bytes(x.a_bytes)} | "
                f"{fmt_bytes(x.b_bytes)} | {fmt_bytes(x.delta)} |" for x in diffs]
    if report.command is not None and (report.command.ignored or report.command.not_modelled):
        out += ["", "#### the pasted command's flags not applied", ""]
        out += [f"- not modelled (may change GPU memory): `{f}`" + (f" ({n})" if n else "")
                for f, n in report.command.not_modelled]
        if report.command.ignored:
            out.append("- ignored (no effect on GPU memory): "
                       + " ".join(f"`{f}`" for f in report.command.ignored))
    out += [f"\n_note: {n}_" for n in e.notes]
    return "\n".join(out) + "\n"
