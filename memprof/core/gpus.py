"""The GPU catalog (``configs/gpus.json``): total memory as ``torch.cuda.mem_get_info`` reports it.

Each entry cites its source in the data file. ``--gpu-memory SIZE`` describes any other GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache

from memprof.base.errors import BadInput, ConfigError
from memprof.core.models import configs_dir


@dataclass(frozen=True, slots=True, kw_only=True)
class GPU:
    """One GPU: ``total_bytes`` as ``torch.cuda.mem_get_info`` reports it (bytes), its
    architecture (``sm90``, ``gfx942``, or ``unknown``) and where the total comes from."""

    name: str
    total_bytes: int
    arch: str  # sm80, sm86, sm89, sm90, sm100, gfx942, gfx950, or "unknown"
    vendor: str = "nvidia"
    exact: bool = True
    source: str = ""
    # GPU peer-to-peer access between two of these in one host (NVLink or PCIe P2P); False where
    # the driver gives none (GeForce RTX 4090), so NCCL connects them through host shared memory
    peer_access: bool = True

    @property
    def is_rocm(self) -> bool:
        """An AMD GPU (ROCm/HIP): by vendor, or by a ``gfx*`` architecture."""
        return self.vendor.lower() == "amd" or self.arch.startswith("gfx")


@lru_cache(maxsize=1)
def catalog() -> tuple[GPU, ...]:
    path = configs_dir() / "gpus.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return tuple(
            GPU(name=g["name"], total_bytes=int(g["total_bytes"]), arch=g["arch"],
                vendor=g.get("vendor", "nvidia"), exact=bool(g.get("exact", True)),
                source=g.get("source", ""), peer_access=bool(g.get("peer_access", True)))
            for g in data["gpus"]
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"the GPU catalog {path} is unreadable: {exc}",
                          hint="reinstall memprof-llm") from None


def _aliases() -> dict[str, str]:
    data = json.loads((configs_dir() / "gpus.json").read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for g in data["gpus"]:
        for alias in [g["name"], *g.get("aliases", [])]:
            out[_norm(alias)] = g["name"]
    return out


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def find_gpu(name: str) -> GPU:
    """Case-insensitive lookup by catalog name or alias (``h200``, ``H100 80GB HBM3``...)."""
    by_name = {g.name: g for g in catalog()}
    key = _aliases().get(_norm(name))
    if key is None:
        raise BadInput(
            f"unknown GPU {name!r}",
            hint="memprof gpus lists the catalog; for another GPU pass --gpu-memory "
            "(e.g. --gpu-memory 23.58GiB)",
        )
    return by_name[key]


def resolve_gpu(name: str | None, memory_bytes: int | None) -> GPU:
    """``--gpu`` and/or ``--gpu-memory``: the memory flag overrides the catalog's total."""
    if name is None and memory_bytes is None:
        return find_gpu("H100-80GB")
    if name is None:
        assert memory_bytes is not None
        return GPU(name="custom", total_bytes=memory_bytes, arch="unknown", exact=True,
                   source="--gpu-memory")
    gpu = find_gpu(name)
    if memory_bytes is not None:
        return replace(gpu, total_bytes=memory_bytes, exact=True, source="--gpu-memory")
    return gpu
