"""``memprof models`` and ``memprof gpus``: what is bundled."""

from __future__ import annotations


def models() -> None:
    """List the bundled models."""
    from rich.console import Console

    from memprof.report.listing import models_table

    Console().print(models_table())


def gpus() -> None:
    """List the GPU catalog (total memory as torch.cuda.mem_get_info reports it)."""
    from rich.console import Console
    from rich.table import Table

    from memprof.base.units import fmt_bytes
    from memprof.core.gpus import catalog

    t = Table()
    for col in ("name", "total", "bytes", "arch", "exact"):
        t.add_column(col, no_wrap=col == "name")
    for g in catalog():
        t.add_row(g.name, fmt_bytes(g.total_bytes), f"{g.total_bytes:,}", g.arch,
                  "yes" if g.exact else "approx.")
    Console().print(t)


