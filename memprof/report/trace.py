"""``TraceResult`` (``memprof trace``) as table, JSON and Markdown; a progress bar.

Reporters of a trace (``TraceResult``): table (component | estimated | traced | Δ | Δ%, then
the phases), JSON (``memprof.trace.contract``, serialised) and Markdown (the table's rows); a
progress bar."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table

from memprof.base.units import fmt_bytes
from memprof.trace.contract import TRACE_SCHEMA_VERSION, trace_dict
from memprof.trace.run import TraceResult

__all__ = ["TRACE_SCHEMA_VERSION", "progress", "render_json", "render_markdown", "render_table",
           "trace_dict"]


def _pct(est: int, traced: int | None) -> str:
    if traced is None or est == 0:
        return ""
    return f"{100.0 * (traced - est) / est:+.1f}%"


def render_json(t: TraceResult, width: int | None = None) -> str:
    del width
    return json.dumps(trace_dict(t), indent=2) + "\n"


def render_table(t: TraceResult, width: int | None = None, *, color: bool = False) -> str:
    buf = io.StringIO()
    c = Console(file=buf, width=width, color_system="auto" if color else None,
                force_terminal=color, highlight=False)
    e = t.estimate
    c.print(f"memprof trace: {e.spec.name} rank {t.rank.coord.rank} on {t.device_name} "
            f"(torch {t.torch_version})")
    tab = Table(title="estimated vs traced", title_justify="left")
    for col, just in (("component", "left"), ("estimated", "right"), ("traced", "right"),
                      ("Δ", "right"), ("Δ%", "right")):
        tab.add_column(col, justify=just)  # type: ignore[arg-type]
    for x in t.components:
        tab.add_row(x.name, fmt_bytes(x.estimated),
                    "—" if x.traced is None else fmt_bytes(x.traced),
                    "" if x.delta is None else fmt_bytes(x.delta), _pct(x.estimated, x.traced))
    c.print(tab)
    ph = Table(title="phases", title_justify="left")
    for col in ("phase", "allocated", "reserved", "peak alloc", "tracked", "non-torch", "s"):
        ph.add_column(col, justify="left" if col == "phase" else "right")
    for p in t.phases:
        ph.add_row(p.name, fmt_bytes(p.allocated), fmt_bytes(p.reserved),
                   fmt_bytes(p.allocated_peak), fmt_bytes(p.tracked),
                   "—" if p.non_torch is None else fmt_bytes(p.non_torch), f"{p.seconds:.2f}")
    c.print(ph)
    if t.oom is not None:
        c.print(f"OOM in phase {t.oom.phase} while allocating {t.oom.component}: "
                f"{' '.join(t.oom.message.split())[:400]}")
    c.print(f"verdict: estimated {t.verdict_estimated}, traced {t.verdict_traced}")
    for n in t.notes:
        c.print(f"note: {n}")
    return buf.getvalue()


def _traced(x: int | None) -> str:
    return "—" if x is None else fmt_bytes(x)


def render_markdown(t: TraceResult) -> str:
    """The trace as GitHub Markdown: the table's rows (components, then phases) and its lines."""
    e = t.estimate
    out = [f"### memprof trace: {e.spec.name} rank {t.rank.coord.rank} on {t.device_name} "
           f"(torch {t.torch_version})", "", "#### estimated vs traced", "",
           "| component | estimated | traced | Δ | Δ% |", "|---|---:|---:|---:|---:|"]
    out += [f"| {x.name} | {fmt_bytes(x.estimated)} | {_traced(x.traced)} | "
            f"{'' if x.delta is None else fmt_bytes(x.delta)} | {_pct(x.estimated, x.traced)} |"
            for x in t.components]
    out += ["", "#### phases", "",
            "| phase | allocated | reserved | peak alloc | tracked | non-torch | s |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {p.name} | {fmt_bytes(p.allocated)} | {fmt_bytes(p.reserved)} | "
            f"{fmt_bytes(p.allocated_peak)} | {fmt_bytes(p.tracked)} | {_traced(p.non_torch)} | "
            f"{p.seconds:.2f} |" for p in t.phases]
    out.append("")
    if t.oom is not None:
        out.append(f"OOM in phase {t.oom.phase} while allocating {t.oom.component}: "
                   f"{' '.join(t.oom.message.split())[:400]}")
        out.append("")
    out.append(f"**verdict: estimated {t.verdict_estimated}, traced {t.verdict_traced}**")
    out += [f"\n_note: {n}_" for n in t.notes]
    return "\n".join(out) + "\n"


@contextmanager
def progress(enabled: bool, console: Console | None = None
             ) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar over the phases, its description naming the phase and the layer a
    forward is at ("profile_run: layer 12/61"), on stderr (``console`` in tests); a no-op when
    disabled."""
    if not enabled:
        yield lambda _p, _d, _t: None
        return
    from rich.progress import Progress

    with Progress(console=console or Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task("trace", total=6)

        def step(phase: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=f"trace: {phase}")

        yield step
