"""``GateResult`` (``memprof gate``) as table, JSON and Markdown.

Reporters of a gate result (``memprof.core.gate.GateResult``): a rich table, Markdown (the same
rows) and JSON (``memprof.core.gate.gate_result_dict``, serialised).

Rows are ordered by importance: regressions, then scenario/rank/input changes, improvements, and
changes within the tolerance.
"""

from __future__ import annotations

import json
import textwrap

from rich import box
from rich.console import Console
from rich.table import Table

from memprof.base.units import fmt_bytes
from memprof.core.gate import (
    EDITED,
    IMPROVEMENT,
    NEW,
    REGRESSION,
    REMOVED,
    WITHIN,
    Finding,
    GateResult,
    gate_result_dict,
    ordered_findings,
)

COLUMNS = ("scenario", "rank", "metric", "baseline", "now", "Δ", "%", "status")
STYLE = {REGRESSION: "bold red", IMPROVEMENT: "green", WITHIN: "dim", NEW: "cyan",
         REMOVED: "yellow", EDITED: "yellow"}


def _value(f: Finding, v: int | str | None) -> str:
    if v is None:
        return "—"
    if f.unit == "bytes" and isinstance(v, int):
        return fmt_bytes(v)
    if f.unit == "tokens" and isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _delta(f: Finding) -> str:
    d = f.delta
    if d is None or d == 0:
        return ""
    if f.unit == "bytes":
        return ("+" if d > 0 else "") + fmt_bytes(d)
    return f"{d:+,}"


def _pct(f: Finding) -> str:
    p = f.pct
    if p is None:
        return "new" if f.unit in ("bytes", "tokens") and not f.baseline and f.now else ""
    return f"{p:+.2f}%"


def rows(result: GateResult) -> list[tuple[str, ...]]:
    return [(f.scenario, f.rank, f.metric, _value(f, f.baseline), _value(f, f.now), _delta(f),
             _pct(f), f.status) for f in ordered_findings(result)]


def summary_line(result: GateResult) -> str:
    tol = f"{result.tolerance_pct:g}%"
    if result.floor_bytes:
        tol += f" and {fmt_bytes(result.floor_bytes)}"
    extra = []
    if result.improvements:
        extra.append(f"{len(result.improvements)} improved")
    if result.new:
        extra.append(f"{len(result.new)} new scenario(s): {', '.join(result.new)}")
    if result.removed:
        extra.append(f"{len(result.removed)} scenario(s) removed, still in the baseline: "
                     f"{', '.join(result.removed)} (memprof gate --update drops them)")
    tail = f"; {'; '.join(extra)}" if extra else ""
    if result.regressed:
        names = result.regressed_scenarios
        return (f"memprof gate: REGRESSION — {len(result.regressions)} figure(s) beyond "
                f"{tol} in {len(names)} of {len(result.compared)} scenario(s): "
                f"{', '.join(names)}{tail}")
    return (f"memprof gate: OK — {len(result.compared)} scenario(s) compared, nothing regressed "
            f"beyond {tol}{tail}")


def render_table(result: GateResult, console: Console) -> None:
    """One small table per (scenario, rank), metric | baseline | now | % | status, so the whole
    report reads at 80 columns (long component names wrap inside their column); an edited
    scenario's inputs are lines of their own (``input_lines``)."""
    if result.findings:
        console.print("memprof gate: what changed against the baseline", style="bold",
                      highlight=False)
    groups: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for row in rows(result):
        groups.setdefault((row[0], row[1]), []).append(row)
    for (scenario, rank), group in groups.items():
        edits = [r for r in group if r[2] == "inputs"]
        group = [r for r in group if r[2] != "inputs"]
        for r in edits:  # whole lines, wrapped, not a table cell squeezed by another column
            console.print(input_lines(scenario, r[3], r[4], console.width),
                          style=STYLE[EDITED], highlight=False, soft_wrap=True)
        if not group:
            continue
        # the title is a line of its own: a table's title wraps at the table's width
        console.print(f"{scenario}" + (f" · {rank}" if rank else ""), style="italic",
                      highlight=False)
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        t.add_column("metric", overflow="fold")
        for col in ("baseline", "now", "%"):
            t.add_column(col, justify="right", no_wrap=True)
        t.add_column("status", no_wrap=True)
        for r in group:
            _s, _r, metric, base, now, _delta, pct, status = r
            t.add_row(metric, base, now, pct, status, style=STYLE.get(status, ""))
        console.print(t)
    style = "bold red" if result.regressed else "bold green"
    console.print(summary_line(result), style=style, highlight=False)


def input_lines(scenario: str, baseline: str, now: str, width: int) -> str:
    """An edited scenario's inputs: the keys that changed, before and after, each wrapped to
    ``width`` at the spaces between ``key=value`` pairs."""
    out = [f"{scenario}: inputs edited (the scenario file changed)"]
    for label, text in (("baseline", baseline), ("now", now)):
        out += textwrap.wrap(text, width, initial_indent=f"  {label:<9} ",
                             subsequent_indent=" " * 12, break_on_hyphens=False) or [
            f"  {label}"]
    return "\n".join(out)


def _md(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: GateResult) -> str:
    lines = ["## memprof gate", "", ("**" + summary_line(result) + "**"), ""]
    if result.findings:
        lines.append("| " + " | ".join(COLUMNS) + " |")
        lines.append("|" + "|".join(["---", "---", "---", "---:", "---:", "---:", "---:", "---"])
                     + "|")
        for row in rows(result):
            cells = [_md(c) for c in row]
            if row[-1] == REGRESSION:
                cells[-1] = "**regression**"
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append("No figure changed.")
    return "\n".join(lines) + "\n"


def render_json(result: GateResult) -> str:
    return json.dumps(gate_result_dict(result), indent=2) + "\n"
