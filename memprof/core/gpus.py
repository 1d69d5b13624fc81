"""The GPU catalog (``configs/gpus.json``): total memory as ``torch.cuda.mem_get_info`` reports it.

Each entry cites its source in the data file. ``--gpu-memory SIZE --gpu-arch ARCH`` describes
any other GPU: :func:`resolve_gpu` refuses the size alone, so that no rule is chosen for an
"unknown" architecture behind the user's back. A caller that has only a size (a start-up log that
prints the total but not the card) asks :func:`unlisted_gpu` for it, and the estimate then states
which rules it applied (:data:`UNKNOWN_ARCH_RULES`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

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
    compute_capability: str | None = None  # "8.9" on NVIDIA; None on AMD (the gfx name says it)
    interconnect: str = ""  # NVLink/NVSwitch, xGMI, PCIe with or without P2P: for the reader
    # every GPU pair of the host joined by NVLink (NVSwitch) or an xGMI full mesh: what vLLM's
    # platform ``is_fully_connected`` reports (see configs/gpus.json's _about)
    fully_connected: bool = False
    # the host's GPUs share a multicast-capable NVSwitch (NVLink SHARP): NCCL sets up NVLS buffers
    # for a communicator of > 2 of them (memprof/core/terms/nccl_nvls.py; configs/gpus.json's
    # nvlink_multicast_source)
    nvlink_multicast: bool = False
    # torch ``multi_processor_count``: streaming multiprocessors on NVIDIA, HIP's compute units on
    # ROCm (workgroup processors on RDNA); None for a card described by ``--gpu-memory`` (see
    # configs/gpus.json's _about)
    sm_count: int | None = None
    # NVML's nvmlDeviceGetMemoryInfo works on this card; False on integrated, unified-memory parts
    # (GB10) where it is not supported (configs/gpus.json nvml_memory_info_source)
    nvml_memory_info: bool = True
    # an integrated GPU sharing the host's memory (CUDA's cudaDevAttrIntegrated, torch's
    # ``get_device_properties().is_integrated``): GB10 (configs/gpus.json integrated_source);
    # vLLM's memory snapshot reads the host's available memory there
    # (memprof/core/engines/unified_memory.py)
    integrated: bool = False
    # the name the driver reports (NVML ``nvmlDeviceGetName`` == ``torch.cuda.get_device_name``,
    # "NVIDIA GeForce RTX 3090"): the catalog's first alias spelt as a driver spells it
    # (``DRIVER_NAME_PREFIXES``); "" where none is known. vLLM's batch defaults read it.
    device_name: str = ""
    # nvidia-smi's memory.total in MiB (rocm-smi's VRAM total on AMD): above torch's total by the
    # memory the driver reserves; None where the catalog has no reading (configs/gpus.json
    # smi_total_mib). SGLang sizes its start-up heuristics on it (engines/sglang.py).
    smi_total_mib: int | None = None
    # the hash of the compared fields, computed once (as ``ModelSpec`` keeps its own): a GPU is
    # part of the value keys a sweep looks up several times a deployment (memprof/batch)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(
            getattr(self, f.name) for f in fields(self) if f.compare)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def is_rocm(self) -> bool:
        """An AMD GPU (ROCm/HIP): by vendor, or by a ``gfx*`` architecture."""
        return self.vendor.lower() == "amd" or self.arch.startswith("gfx")


@lru_cache(maxsize=1)
def _catalog_file() -> dict[str, Any]:
    """``configs/gpus.json``, read and parsed once per process."""
    path = configs_dir() / "gpus.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the GPU catalog {path} is unreadable: {exc}",
                          hint="reinstall memprof-llm") from None


# how the NVIDIA and AMD drivers begin a device's name ("NVIDIA H100 80GB HBM3", "Tesla T4",
# "AMD Instinct MI300X"); the catalog lists those names among a GPU's aliases
DRIVER_NAME_PREFIXES = ("NVIDIA ", "Tesla ", "AMD ")


def _driver_name(row: dict[str, Any]) -> str:
    """The first alias of a catalog row spelt as the driver reports the device ("")."""
    return next((a for a in row.get("aliases", []) if a.startswith(DRIVER_NAME_PREFIXES)), "")


@lru_cache(maxsize=1)
def catalog() -> tuple[GPU, ...]:
    path = configs_dir() / "gpus.json"
    try:
        data = _catalog_file()
        return tuple(
            GPU(name=g["name"], total_bytes=int(g["total_bytes"]), arch=g["arch"],
                vendor=g.get("vendor", "nvidia"), exact=bool(g.get("exact", True)),
                source=g.get("source", ""), peer_access=bool(g.get("peer_access", True)),
                compute_capability=g.get("compute_capability"),
                interconnect=g.get("interconnect", ""),
                fully_connected=bool(g.get("fully_connected", False)),
                nvlink_multicast=bool(g.get("nvlink_multicast", False)),
                sm_count=g.get("sm_count"), device_name=_driver_name(g),
                nvml_memory_info=bool(g.get("nvml_memory_info", True)),
                integrated=bool(g.get("integrated", False)),
                smi_total_mib=g.get("smi_total_mib"))
            for g in data["gpus"]
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"the GPU catalog {path} is unreadable: {exc}",
                          hint="reinstall memprof-llm") from None


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    """Every catalog name and alias, normalised (``_norm``) → the catalog name (read-only)."""
    data = _catalog_file()
    out: dict[str, str] = {}
    for g in data["gpus"]:
        for alias in [g["name"], *g.get("aliases", [])]:
            out[_norm(alias)] = g["name"]
    return out


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


# "-80G", " 24GB", "_141GiB" at the end of a name: a memory size, which the catalog may spell
# differently (or not at all) in its names
_MEMORY_SUFFIX = re.compile(r"[\s_-]*[0-9]+(?:\.[0-9]+)?\s*(?:g|gb|gib)$", re.I)
_SUGGEST_CUTOFF = 0.8  # difflib ratio: "b200x" → B200 (0.89), but not "V100" → H100 (0.75)


def suggest_gpus(name: str, limit: int = 3) -> list[str]:
    """Catalog names close to ``name``: the same name without its memory suffix
    (``H100-94GB`` → H100-80GB), catalog names it begins (``A100`` → A100-80GB, A100-40GB),
    and close spellings (difflib). Empty when nothing is close (``T4``, ``V100``)."""
    import difflib  # only for a misspelt GPU: kept off the cold start

    if len(name) > 100:
        return []
    aliases = _aliases()
    out: list[str] = []

    def add(catalog_name: str) -> None:
        if catalog_name not in out:
            out.append(catalog_name)

    bare = _norm(_MEMORY_SUFFIX.sub("", name.strip()))
    key = _norm(name)
    for probe in dict.fromkeys((bare, key)):
        if not probe:
            continue
        if probe in aliases:
            add(aliases[probe])
        for g in catalog():  # a catalog name that starts with what was typed
            long_enough = len(probe) >= 4 or (len(probe) >= 2 and probe[-1].isdigit())
            if long_enough and _norm(g.name).startswith(probe):
                add(g.name)
        for close in difflib.get_close_matches(probe, list(aliases), n=limit,
                                               cutoff=_SUGGEST_CUTOFF):
            add(aliases[close])
    return out[:limit]


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def find_gpu(name: str) -> GPU:
    """Case-insensitive lookup by catalog name or alias (``h200``, ``H100 80GB HBM3``...); an
    unknown name is :class:`BadInput` that names the close catalog entries, or the way out."""
    by_name = {g.name: g for g in catalog()}
    key = _aliases().get(_norm(name))
    if key is None:
        shown = name if len(name) <= 60 else name[:60] + "…"
        close = suggest_gpus(name)
        if close:
            raise BadInput(
                f"unknown GPU {shown!r}",
                hint=f"did you mean {_either(close)}? (memprof gpus lists the catalog; for "
                "a GPU not in it pass --gpu-memory SIZE --gpu-arch ARCH, e.g. --gpu-memory "
                "23.58GiB --gpu-arch sm89)")
        raise BadInput(
            f"unknown GPU {shown!r}: it is not in memprof's GPU catalog",
            hint="pass its memory and architecture instead with --gpu-memory SIZE --gpu-arch "
            "ARCH (the total torch.cuda.mem_get_info reports, e.g. --gpu-memory 14.58GiB "
            "--gpu-arch sm75) and leave out --gpu; memprof gpus lists the catalog")
    return by_name[key]


def arch_cc(arch: str) -> int | None:
    """The compute capability of an NVIDIA architecture name as an int (``sm75`` -> 75); None
    for a ROCm one (``gfx942``), ``unknown`` or none."""
    digits = arch[2:]
    return int(digits) if arch.startswith("sm") and digits.isdigit() else None


def known_archs() -> tuple[str, ...]:
    """The architectures of the catalog's rows (``sm75`` … ``gfx1100``), in catalog order: the
    values an architecture given beside ``--gpu-memory`` may take."""
    return tuple(dict.fromkeys(g.arch for g in catalog()))


def find_arch(arch: str) -> GPU:
    """The first catalog row of architecture ``arch`` (``SM89``, ``sm_89`` and ``8.9`` spell
    ``sm89``): the platform facts (vendor, compute capability) a card of that architecture
    shares. An architecture no row has is :class:`BadInput` naming the known ones."""
    key = _norm(arch)
    if key.isdigit():  # a compute capability: "8.9" → sm89, "10.0" → sm100
        key = "sm" + key
    for g in catalog():
        if g.arch == key:
            return g
    shown = arch if len(arch) <= 30 else arch[:30] + "…"
    raise BadInput(f"unknown GPU architecture {shown!r}",
                   hint="give one of " + ", ".join(known_archs())
                   + " (nvidia-smi --query-gpu=compute_cap prints 8.9 for sm89; rocminfo prints "
                   "the gfx name)")


UNKNOWN_ARCH_RULES = ("GPU architecture not given: memprof sizes the card as one with fp8 "
                      "hardware and Marlin (no compute-capability gate or fallback), with "
                      "Hopper's (sm90) default attention backends and block sizes and no "
                      "backend refusals; add --gpu-arch (or --gpu) for the card's own")
"""What an estimate on :func:`unlisted_gpu` assumes, as its note says it (weights/formats.py
``_cuda_sm``, attention_backends.py ``default_for`` / ``arch_refusal`` read ``unknown`` so)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformRow:
    """The start-up figures outside PyTorch's allocator as measured on some architectures: the
    CUDA context, the cuBLAS / cuBLASLt / Triton modules the profile run loads and the NCCL
    communicators (the constants of ``memprof.core.terms.non_torch`` and the rows of
    ``memprof.core.terms.nccl``). An architecture no row measured takes ``PLATFORM_ROWS[0]``'s
    figures, and the estimate says so (:func:`platform_note`)."""

    name: str
    archs: tuple[str, ...]  # the architectures these figures were measured on
    measured_on: str
    source: str


PLATFORM_ROWS: tuple[PlatformRow, ...] = (
    PlatformRow(
        name="CUDA on Hopper", archs=("sm90",),
        measured_on="H100 SXM and H200, driver 580.159.04, torch 2.11.0+cu130",
        source="tests/data/measured_h100_overheads.json (context, cuBLAS, Triton steps); "
        "reports/gpu/trace/context-probe-h200.json (the same context, 552,402,944 B, on "
        "H200); reports/gpu/nccl (the communicators)"),
)
"""Every architecture whose own platform figures memprof has. Ampere (sm80/86), Ada (sm89),
Blackwell (sm100/103/120/121), Volta (sm70), Turing (sm75) and every ROCm architecture (CDNA2
gfx90a, CDNA3 gfx942, CDNA4 gfx950, RDNA3 gfx1100: HIP context, hipBLAS/hipBLASLt modules, RCCL)
are not measured yet: a row here, with its golden, is how one becomes exact."""


def measured_platform(arch: str) -> PlatformRow | None:
    """The row that measured ``arch``'s own platform figures, or None."""
    return next((r for r in PLATFORM_ROWS if arch in r.archs), None)


def platform_note(gpu: GPU) -> str | None:
    """The assumption line of an estimate on an architecture whose platform figures were not
    measured: which measured architecture's figures it used instead (None where measured)."""
    if measured_platform(gpu.arch) is not None:
        return None
    used = PLATFORM_ROWS[0]
    what = ("HIP context, hipBLAS/hipBLASLt/Triton modules and RCCL communicators"
            if gpu.is_rocm else "CUDA context, cuBLAS/Triton modules and NCCL communicators")
    arch = "the unknown architecture's" if gpu.arch == "unknown" else f"{gpu.arch}'s"
    # on CUDA three parts are derived per card since (memprof/core/terms/non_torch.py,
    # first_kernel.py): the context's stack reservation (SMs x resident threads per SM), the
    # first kernel's assert/printf reservation (by resident threads) and cuBLAS's default pool
    own = ("" if gpu.is_rocm or gpu.arch == "unknown" else
           " where the card's own are not derived (the CUDA context and profile-run rows say "
           "which parts are)")
    return (f"platform: {what}: {arch} not measured; memprof uses "
            f"{'/'.join(used.archs)}'s ({used.measured_on.split(',')[0]}) figures{own}")


def unlisted_gpu(memory_bytes: int, source: str = "--gpu-memory") -> GPU:
    """A card known only by its total (``source`` says where it comes from): architecture
    ``unknown``, whose rules :data:`UNKNOWN_ARCH_RULES` states in the estimate's notes. Only for
    callers that cannot ask for the architecture (a log, the Python API); the flags refuse it
    (:func:`resolve_gpu`)."""
    return GPU(name="custom", total_bytes=memory_bytes, arch="unknown", exact=True,
               source=source)


# a printed total within 0.5% of a catalog GPU's is that GPU
GPU_MATCH = 0.005
# half of the 0.01 GiB an engine rounds a printed total to (vLLM's "total_gpu_memory
# (93.10GiB)", torch's OOM "total capacity of 93.10 GiB")
PRINTED_ROUNDING = (1 << 30) // 200


def gpu_from_total(total_bytes: float) -> GPU:
    """The card a total printed in a log (or read off one) stands for: the catalog card whose
    total prints as this one, at its exact total; one within ``GPU_MATCH``, at the printed
    total; else a card of that total and unknown architecture. ``memprof explain`` takes a
    log's card this way (``memprof.probes.log_deployment.log_gpu``), and so does the calibration
    test for a row that gives only the total (tests/test_published_distribution.py)."""
    best = min(catalog(), key=lambda g: abs(g.total_bytes - total_bytes))
    if abs(best.total_bytes - total_bytes) <= PRINTED_ROUNDING:
        return best
    if abs(best.total_bytes - total_bytes) <= GPU_MATCH * total_bytes:
        return replace(best, total_bytes=int(total_bytes), exact=False,
                       source="the log's total (rounded to 0.01 GiB)")
    return GPU(name="from log", total_bytes=int(total_bytes), arch="unknown", exact=False,
               source="the log's total")


def resolve_gpu(name: str | None, memory_bytes: int | None, arch: str | None = None) -> GPU:
    """``--gpu`` and/or ``--gpu-memory``: the memory flag overrides the catalog's total. A
    ``--gpu-memory``-only GPU needs ``arch`` (a catalog architecture) and takes that
    architecture's platform facts; without one it is :class:`BadInput` (the kernels, backends
    and platform figures of a card differ by architecture). With ``--gpu`` too the two must
    agree."""
    if name is None and memory_bytes is None:
        if arch is not None:
            raise BadInput("--gpu-arch without --gpu-memory sizes no GPU",
                           hint="add --gpu-memory SIZE (the total torch.cuda.mem_get_info "
                           "reports), or name the card with --gpu")
        return find_gpu("H100-80GB")
    if name is None:
        assert memory_bytes is not None
        if arch is None:
            raise BadInput("--gpu-memory without --gpu-arch: the card's architecture decides "
                           "its kernels, attention backends and platform figures",
                           hint="add --gpu-arch ARCH (one of " + ", ".join(known_archs())
                           + "; nvidia-smi --query-gpu=compute_cap prints 8.9 for sm89, "
                           "rocminfo the gfx name), or name a catalog card with --gpu "
                           "(memprof gpus)")
        like = find_arch(arch)
        return GPU(name=f"custom {like.arch}", total_bytes=memory_bytes, arch=like.arch,
                   vendor=like.vendor, exact=True, source="--gpu-memory",  # SM count unknown
                   compute_capability=like.compute_capability, integrated=like.integrated,
                   interconnect="unknown (PCIe with peer access assumed)")
    gpu = find_gpu(name)
    if arch is not None and find_arch(arch).arch != gpu.arch:
        raise BadInput(f"--gpu {name} is {gpu.arch}, but --gpu-arch says {find_arch(arch).arch}",
                       hint=f"leave out --gpu-arch (the catalog knows the {gpu.name}'s) or --gpu")
    if memory_bytes is not None:
        return replace(gpu, total_bytes=memory_bytes, exact=True, source="--gpu-memory")
    return gpu
