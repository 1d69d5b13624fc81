"""Renderers of a trace: the table (component | estimated | traced | Δ | Δ%, then the phases) and
the JSON document (``schema_version`` 1, the estimate's component names); a progress bar."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

from memprof.base.units import fmt_bytes
from memprof.trace.run import TraceResult

TRACE_SCHEMA_VERSION = 1


def _pct(est: int, traced: int | None) -> str:
    if traced is None or est == 0:
        return ""
    return f"{100.0 * (traced - est) / est:+.1f}%"


def trace_dict(t: TraceResult) -> dict[str, Any]:
    r = t.rank
    return {
        "schema_version": TRACE_SCHEMA_VERSION,
        "model": t.estimate.spec.name,
        "gpu": {"name": t.estimate.gpu.name, "total_bytes": t.estimate.gpu.total_bytes},
        "device": t.device, "device_name": t.device_name, "torch_version": t.torch_version,
        "rank": r.coord.rank, "ranks": list(r.same_as),
        "deployment": {"tensor_parallel_size": t.estimate.deployment.tp,
                       "pipeline_parallel_size": t.estimate.deployment.pp,
                       "data_parallel_size": t.estimate.deployment.dp,
                       "kv_cache_dtype": t.estimate.deployment.kv_cache_dtype,
                       "max_num_seqs": t.estimate.deployment.max_num_seqs,
                       "max_num_batched_tokens": t.estimate.max_num_batched_tokens,
                       "scratch": t.estimate.deployment.scratch,
                       "num_gpu_blocks": r.kv.num_gpu_blocks},
        "components": [{"name": c.name, "category": c.category, "estimated_bytes": c.estimated,
                        "traced_bytes": c.traced, "delta_bytes": c.delta, "how": c.how}
                       for c in t.components],
        "phases": [{"name": p.name, "allocated_bytes": p.allocated,
                    "reserved_bytes": p.reserved, "allocated_peak_bytes": p.allocated_peak,
                    "reserved_peak_bytes": p.reserved_peak, "segments": p.segments,
                    "tracked_bytes": p.tracked, "tracked_peak_bytes": p.tracked_peak,
                    "used_bytes": p.used, "non_torch_bytes": p.non_torch,
                    "seconds": round(p.seconds, 3)} for p in t.phases],
        "graph_sizes": list(t.graph_sizes),
        "verdict": {"estimated": t.verdict_estimated, "traced": t.verdict_traced},
        "notes": list(t.notes),
        "oom": None if t.oom is None else {"phase": t.oom.phase, "component": t.oom.component,
                                            "message": t.oom.message},
    }


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
