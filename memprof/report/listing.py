"""Model and GPU records (``memprof models``, ``memprof gpus``) as table, JSON and Markdown.

Reporters of the listings (``memprof models``, ``memprof gpus``; records from
``memprof.core.listing``): rich tables whose cells are never cut (every name whole at 80
columns), JSON (serialised records) and Markdown (the tables' rows)."""

from __future__ import annotations

import json
from typing import Any, Literal

from rich import box
from rich.table import Table

from memprof.base.units import fmt_bytes
from memprof.core.listing import gpu_records, listing_dict, model_records

SUFFIXES = ("ForCausalLM", "ForConditionalGeneration")  # a decoder's class, a multimodal wrapper's
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
MODEL_COLUMNS = ("name", "arch", "layers", "hidden", "attn", "experts", "quant")
GPU_COLUMNS = ("name", "total", "bytes", "arch", "exact")
Listing = Literal["models", "gpus"]


def _model_cells(m: dict[str, Any]) -> tuple[str, ...]:
    arch = m["architecture"]
    for suffix in SUFFIXES:
        arch = arch.removesuffix(suffix)
    arch = arch or m["architecture"]
    quant = m["quantization"] or DTYPES.get(m["dtype"], m["dtype"])
    return (m["name"], arch, str(m["num_layers"]), str(m["hidden_size"]), m["attention"],
            str(m["num_experts"] or "-"), quant)


def _gpu_cells(g: dict[str, Any]) -> tuple[str, ...]:
    return (g["name"], fmt_bytes(g["total_bytes"]), f"{g['total_bytes']:,}", g["arch"],
            "yes" if g["exact"] else "approx.")


def models_table() -> Table:
    """The bundled models, one line each in 80 columns, no cell wrapped or cut: the
    architecture without its ``ForCausalLM`` / ``ForConditionalGeneration`` suffix and short
    dtypes (the caption says so)."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
              caption=f"arch: the class less {'/'.join(SUFFIXES)}; bf16: bfloat16",
              caption_justify="left")
    for col in MODEL_COLUMNS:
        t.add_column(col, no_wrap=True,
                     justify="right" if col in ("layers", "hidden", "experts") else "left")
    for m in model_records():
        t.add_row(*_model_cells(m))
    return t


def gpus_table() -> Table:
    """The GPU catalog (total memory as torch.cuda.mem_get_info reports it)."""
    t = Table()
    for col in GPU_COLUMNS:
        t.add_column(col, no_wrap=col == "name")
    for g in gpu_records():
        t.add_row(*_gpu_cells(g))
    return t


def render_table(kind: Listing = "models", width: int | None = 80, *, color: bool = False) -> str:
    """The listing's table as text, ``width`` columns (``None``: the terminal's)."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, force_terminal=color,
            color_system="auto" if color else None).print(
        models_table() if kind == "models" else gpus_table())
    return buf.getvalue()


def render_json(kind: Listing = "models") -> str:
    return json.dumps(listing_dict(kind), indent=2) + "\n"


def render_markdown(kind: Listing = "models") -> str:
    """The listing as GitHub Markdown: the table's rows (and, for models, its caption)."""
    cols: tuple[str, ...]
    if kind == "models":
        cols, cells = MODEL_COLUMNS, [_model_cells(m) for m in model_records()]
        right = {"layers", "hidden", "experts"}
    else:
        cols, cells = GPU_COLUMNS, [_gpu_cells(g) for g in gpu_records()]
        right = {"total", "bytes"}
    out = [f"### memprof {kind}", "", "| " + " | ".join(cols) + " |",
           "|" + "|".join("---:" if c in right else "---" for c in cols) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in cells]
    if kind == "models":
        out += ["", f"_arch: the model class less {' / '.join(SUFFIXES)}; bf16: bfloat16_"]
    return "\n".join(out) + "\n"
