"""What is bundled, as records: the models (``memprof models``) and the GPU catalog
(``memprof gpus``), one JSON-able dict each, so every reporter of a listing reads the same
fields (sizes in integer bytes)."""

from __future__ import annotations

from typing import Any

from memprof.core.gpus import catalog
from memprof.core.models import bundled_models, load_model

LISTING_SCHEMA_VERSION = 1


def model_records() -> list[dict[str, Any]]:
    """One record per bundled model: its name, architecture, layers, hidden size, the first
    layer's attention kind, routed experts (``None`` for a dense model), quantisation method
    (``None`` when unquantised) and dtype."""
    out = []
    for name in bundled_models():
        s = load_model(name)
        out.append({"name": name, "architecture": s.architecture, "num_layers": s.num_layers,
                    "hidden_size": s.hidden_size, "attention": s.layers[0].attention.kind,
                    "num_experts": s.num_experts or None,
                    "quantization": s.quant.method if s.quant else None, "dtype": s.dtype})
    return out


def gpu_records() -> list[dict[str, Any]]:
    """One record per catalog GPU: name, total bytes as ``torch.cuda.mem_get_info`` reports
    them, architecture, and whether the total is exact (measured) or approximate."""
    return [{"name": g.name, "total_bytes": g.total_bytes, "arch": g.arch, "exact": g.exact}
            for g in catalog()]


def listing_dict(kind: str) -> dict[str, Any]:
    """``memprof models`` (``kind`` "models") or ``memprof gpus`` ("gpus") as a JSON document."""
    records = model_records() if kind == "models" else gpu_records()
    return {"schema_version": LISTING_SCHEMA_VERSION, kind: records}
