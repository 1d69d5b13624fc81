"""``memprof models`` as a table whose cells are never cut: every name whole at 80 columns."""

from __future__ import annotations

from rich import box
from rich.table import Table

from memprof.core.models import bundled_models, load_model

SUFFIX = "ForCausalLM"
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def models_table() -> Table:
    """The bundled models, one line each in 80 columns, no cell wrapped or cut: the
    architecture without its ``ForCausalLM`` suffix and short dtypes (the caption says so)."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
              caption=f"arch: the model class less {SUFFIX}; bf16: bfloat16",
              caption_justify="left")
    for col in ("name", "arch", "layers", "hidden", "attn", "experts", "quant"):
        t.add_column(col, no_wrap=True,
                     justify="right" if col in ("layers", "hidden", "experts") else "left")
    for name in bundled_models():
        s = load_model(name)
        a = s.layers[0].attention
        arch = s.architecture.removesuffix(SUFFIX) or s.architecture
        quant = s.quant.method if s.quant else DTYPES.get(s.dtype, s.dtype)
        t.add_row(name, arch, str(s.num_layers), str(s.hidden_size), a.kind,
                  str(s.num_experts or "-"), quant)
    return t
