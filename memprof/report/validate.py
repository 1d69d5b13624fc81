"""Validations (``memprof validate``) as table, JSON and Markdown.

Reporters of one ``memprof.validation.results.ValidationRun``, each called with the run alone
(and the table's width): JSON (``validation_dict``, serialised), the table and Markdown. Every
validation is laid out from the block it gives (``memprof.validation.registry.Block``: a title,
a table of the scratch each policy holds beside the estimate, lines of parity, memory,
graph-clean, speed and its verdict), whatever it validates; with several, one summary table
follows."""

from __future__ import annotations

import io
import json

from rich.console import Console
from rich.table import Table

from memprof.validation.registry import Block, Validation, ok
from memprof.validation.results import VALIDATE_SCHEMA_VERSION, ValidationRun, validation_dict

__all__ = ["VALIDATE_SCHEMA_VERSION", "render_json", "render_markdown", "render_table"]

SUMMARY_COLUMNS = ("kernel", "model", "path", "parity", "memory = estimate", "graph-clean",
                   "speed", "verdict")


def render_json(run: ValidationRun) -> str:
    return json.dumps(validation_dict(run), indent=2) + "\n"


def _block(b: Block, console: Console) -> None:
    console.print(b.title, style="bold")
    t = Table(show_lines=False)
    for i, col in enumerate(b.columns):
        t.add_column(col, justify="left" if i == 0 else "right")
    for row in b.rows:
        t.add_row(*row)
    console.print(t)
    for line in b.lines:
        console.print(line)


def _summary_rows(kernels: tuple[Validation, ...]) -> list[list[str]]:
    return [[k.kernel, k.model, f"{k.path} on {k.device}", ok(k.parity_passed),
             ok(k.memory_passed), ok(k.graph_passed), ok(k.speed_passed),
             "PASS" if k.passed else "FAIL"] for k in kernels]


def render_table(run: ValidationRun, width: int | None = None, *, color: bool = False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width or 120, force_terminal=color, no_color=not color,
                      highlight=False, markup=False)
    for k in run.kernels:
        _block(k.block(), console)
        console.print()
    if len(run.kernels) > 1:
        t = Table(title="summary", show_lines=False)
        for col in SUMMARY_COLUMNS:
            t.add_column(col)
        for row in _summary_rows(run.kernels):
            t.add_row(*row)
        console.print(t)
    console.print(_verdict(run))
    return buf.getvalue()


def _verdict(run: ValidationRun) -> str:
    failed = [k.kernel for k in run.kernels if not k.passed]
    return "verdict: " + ("all checks hold" if not failed else f"FAIL ({', '.join(failed)})")


def render_markdown(run: ValidationRun) -> str:
    """A page for a pull request: the summary table, then each validation's report verbatim."""
    lines = [f"## memprof validate — {run.device_name}, torch {run.torch_version}", "",
             "| " + " | ".join(SUMMARY_COLUMNS) + " |",
             "|" + "---|" * len(SUMMARY_COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in _summary_rows(run.kernels)]
    lines += ["", f"**{_verdict(run)}**", "", "<details><summary>full report</summary>",
              "", "```", render_table(run, 120).rstrip(), "```", "", "</details>", ""]
    return "\n".join(lines)
