"""``memprof models`` and ``memprof gpus``: what is bundled."""

from __future__ import annotations


def models() -> None:
    """List the bundled models."""
    from rich.console import Console
    from rich.table import Table

    from memprof.core.models import bundled_models, load_model

    t = Table()
    for col in ("name", "architecture", "layers", "hidden", "attention", "experts", "quant"):
        t.add_column(col, no_wrap=col == "name")
    for name in bundled_models():
        s = load_model(name)
        a = s.layers[0].attention
        t.add_row(name, s.architecture, str(s.num_layers), str(s.hidden_size), a.kind,
                  str(s.num_experts or "-"), s.quant.method if s.quant else s.dtype)
    Console().print(t)


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


