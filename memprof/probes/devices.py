"""The GPUs of this host, through NVML (``pynvml``, from nvidia-ml-py) and AMD SMI (``amdsmi``).

One chokepoint per library: every query goes through ``_query``, which turns the library's own
error into ``None`` (a field that is shown as unavailable), so a GPU that refuses one query never
crashes a listing. What cannot be done at all — neither library installed, no driver, no GPU —
is one ``EnvironmentProblem`` (exit 3) with what to install or check.

Totals: the device total that a serving engine sees (``torch.cuda.mem_get_info()[1]``) is, on
NVIDIA, NVML's ``total − reserved`` (``nvmlDeviceGetMemoryInfo`` v2; ``configs/gpus.json``
``_about``: nvidia-smi Total minus Reserved); on AMD, the VRAM total AMD SMI reports (equal to
torch's on ROCm, ``configs/gpus.json`` MI300X).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from memprof.base.errors import EnvironmentProblem
from memprof.core.gpus import GPU, catalog

INSTALL_HINT = ("NVIDIA: pip install nvidia-ml-py (and a driver: nvidia-smi must work); AMD: "
                "pip install amdsmi (ROCm); or name the GPU with --gpu, or --gpu-memory with "
                "--gpu-arch")


@dataclass(frozen=True, slots=True, kw_only=True)
class Process:
    pid: int
    name: str
    used_bytes: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    """One GPU of this host; a field its library refused to report is ``None``."""

    index: int
    vendor: str  # nvidia | amd
    name: str | None
    total_bytes: int | None  # as the serving engine sees it (see the module's docstring)
    free_bytes: int | None
    used_bytes: int | None
    driver: str | None
    arch: str | None = None
    processes: tuple[Process, ...] | None = None
    problems: tuple[str, ...] = ()


def device_dict(d: Device) -> dict[str, Any]:
    """One GPU as a record of ``memprof devices --format json`` (sizes in bytes; ``None``
    where the library did not report a field)."""
    return {"index": d.index, "vendor": d.vendor, "name": d.name, "arch": d.arch,
            "total_bytes": d.total_bytes, "free_bytes": d.free_bytes,
            "used_bytes": d.used_bytes, "driver": d.driver,
            "processes": None if d.processes is None else [
                {"pid": p.pid, "name": p.name, "used_bytes": p.used_bytes}
                for p in d.processes],
            "problems": list(d.problems)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """What the host reported: its devices and, per library, why it gave none."""

    devices: tuple[Device, ...]
    failures: tuple[str, ...]


def _import(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
    except Exception:  # a broken install (missing shared library at import time)
        return None


def _query(fn: Callable[..., Any], *args: Any, problems: list[str] | None = None,
           what: str = "") -> Any | None:
    """The chokepoint: the value, or None (and a note) when the library refuses."""
    try:
        return fn(*args)
    except Exception as exc:  # each library has its own error classes
        if problems is not None:
            problems.append(f"{what}: {type(exc).__name__}: {' '.join(str(exc).split())[:80]}")
        return None


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return str(v)


# --- NVIDIA --------------------------------------------------------------------------------------


def _nvml_init_failure(nv: Any, exc: Exception) -> str:
    name = type(exc).__name__
    if "LibraryNotFound" in name:
        return "NVML: libnvidia-ml.so not found (no NVIDIA driver on this host)"
    if "DriverNotLoaded" in name:
        return "NVML: the NVIDIA driver is not loaded"
    if "NoPermission" in name:
        return "NVML: no permission to query the GPUs"
    return f"NVML: initialisation failed ({name}: {' '.join(str(exc).split())[:80]})"


def _nvidia() -> tuple[list[Device], str | None]:
    nv = _import("pynvml")
    if nv is None:
        return [], "pynvml (nvidia-ml-py) is not installed"
    try:
        nv.nvmlInit()
    except Exception as exc:
        return [], _nvml_init_failure(nv, exc)
    try:
        count = nv.nvmlDeviceGetCount()
    except Exception as exc:
        return [], f"NVML: cannot count the GPUs ({type(exc).__name__})"
    try:
        driver = _text(_query(nv.nvmlSystemGetDriverVersion))
        out = [_nv_device(nv, i, driver) for i in range(int(count))]
    finally:
        _query(nv.nvmlShutdown)
    return out, None


def _nv_device(nv: Any, i: int, driver: str | None) -> Device:
    problems: list[str] = []
    h = _query(nv.nvmlDeviceGetHandleByIndex, i, problems=problems, what="handle")
    if h is None:
        return Device(index=i, vendor="nvidia", name=None, total_bytes=None, free_bytes=None,
                      used_bytes=None, driver=driver, problems=tuple(problems))
    name = _text(_query(nv.nvmlDeviceGetName, h, problems=problems, what="name"))
    mem = _query(lambda: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2),
                 problems=problems, what="memory (v2)")
    total = free = used = None
    if mem is not None:
        total = int(mem.total) - int(getattr(mem, "reserved", 0) or 0)
        free, used = int(mem.free), int(mem.used)
    else:  # drivers before v2: the total then includes the driver's reservation
        mem1 = _query(nv.nvmlDeviceGetMemoryInfo, h, problems=problems, what="memory")
        if mem1 is not None:
            total, free, used = int(mem1.total), int(mem1.free), int(mem1.used)
            problems.append("memory: NVML v1 only, so the total includes the driver's "
                            "reservation")
    cc = _query(nv.nvmlDeviceGetCudaComputeCapability, h, problems=problems,
                what="compute capability")
    arch = f"sm{cc[0]}{cc[1]}" if isinstance(cc, tuple) and len(cc) == 2 else None
    procs = _query(nv.nvmlDeviceGetComputeRunningProcesses, h, problems=problems,
                   what="processes")
    processes = None
    if procs is not None:
        processes = tuple(Process(pid=int(p.pid), name=_proc_name(nv, int(p.pid)),
                                  used_bytes=_nv_used(p)) for p in procs)
    return Device(index=i, vendor="nvidia", name=name, total_bytes=total, free_bytes=free,
                  used_bytes=used, driver=driver, arch=arch, processes=processes,
                  problems=tuple(problems))


def _nv_used(p: Any) -> int | None:
    v = getattr(p, "usedGpuMemory", None)
    # NVML reports "not available" (in containers, without permission) as a huge sentinel
    if v is None or not isinstance(v, int) or v < 0 or v >= (1 << 60):
        return None
    return v


def _proc_name(nv: Any, pid: int) -> str:
    name = _text(_query(getattr(nv, "nvmlSystemGetProcessName", lambda _pid: None), pid))
    return (name or "?").rsplit("/", 1)[-1]


# --- AMD -----------------------------------------------------------------------------------------


def _amd() -> tuple[list[Device], str | None]:
    amd = _import("amdsmi")
    if amd is None:
        return [], "amdsmi is not installed"
    try:
        amd.amdsmi_init()
    except Exception as exc:
        return [], f"AMD SMI: initialisation failed ({type(exc).__name__}: " \
                   f"{' '.join(str(exc).split())[:80]}; is the amdgpu driver loaded?)"
    try:
        handles = amd.amdsmi_get_processor_handles()
    except Exception as exc:
        _query(amd.amdsmi_shut_down)
        return [], f"AMD SMI: cannot list the GPUs ({type(exc).__name__})"
    try:
        out = [_amd_device(amd, i, h) for i, h in enumerate(handles)]
    finally:
        _query(amd.amdsmi_shut_down)
    return out, None


def _amd_device(amd: Any, i: int, h: Any) -> Device:
    problems: list[str] = []
    asic = _query(amd.amdsmi_get_gpu_asic_info, h, problems=problems, what="name") or {}
    name = _text(asic.get("market_name")) if isinstance(asic, dict) else None
    arch = _text(asic.get("target_graphics_version")) if isinstance(asic, dict) else None
    vram = getattr(getattr(amd, "AmdSmiMemoryType", None), "VRAM", None)
    total = _query(amd.amdsmi_get_gpu_memory_total, h, vram, problems=problems, what="total")
    used = _query(amd.amdsmi_get_gpu_memory_usage, h, vram, problems=problems, what="usage")
    drv = _query(amd.amdsmi_get_gpu_driver_info, h, problems=problems, what="driver") or {}
    driver = _text(drv.get("driver_version")) if isinstance(drv, dict) else None
    plist = _query(amd.amdsmi_get_gpu_process_list, h, problems=problems, what="processes")
    processes = None
    if isinstance(plist, list):
        processes = tuple(_amd_process(p) for p in plist)
    t = int(total) if isinstance(total, int) else None
    u = int(used) if isinstance(used, int) else None
    return Device(index=i, vendor="amd", name=name, total_bytes=t,
                  free_bytes=None if t is None or u is None else t - u, used_bytes=u,
                  driver=driver, arch=arch, processes=processes, problems=tuple(problems))


def _amd_process(p: Any) -> Process:
    if not isinstance(p, dict):
        return Process(pid=-1, name="?", used_bytes=None)
    mem = p.get("mem")
    usage = p.get("memory_usage")
    if isinstance(usage, dict) and isinstance(usage.get("vram_mem"), int):
        mem = usage["vram_mem"]
    pid = p.get("pid")
    return Process(pid=int(pid) if isinstance(pid, int) else -1, name=str(p.get("name") or "?"),
                   used_bytes=mem if isinstance(mem, int) else None)


# --- the host ------------------------------------------------------------------------------------


def probe() -> Probe:
    """Every GPU NVML and AMD SMI report, and why a library reported none."""
    devices: list[Device] = []
    failures: list[str] = []
    for fn in (_nvidia, _amd):
        found, why = fn()
        devices += found
        if why:
            failures.append(why)
    return Probe(devices=tuple(devices), failures=tuple(failures))


def devices() -> list[Device]:
    """The host's GPUs; ``EnvironmentProblem`` (exit 3) when there are none to be had."""
    p = probe()
    if not p.devices:
        raise EnvironmentProblem("no GPU found on this host: " + "; ".join(p.failures),
                                 hint=INSTALL_HINT)
    return list(p.devices)


def local_gpu() -> GPU:
    """``--gpu auto``: this host's GPU with its exact total, its catalog entry's architecture.
    Mixed GPUs, or a GPU that does not report its total, is an error (exit 3)."""
    devs = devices()
    names = {d.name for d in devs}
    totals = {d.total_bytes for d in devs}
    first = devs[0]
    if first.total_bytes is None or None in totals:
        bad = next(d for d in devs if d.total_bytes is None)
        raise EnvironmentProblem(f"GPU {bad.index} ({bad.name or 'unnamed'}) does not report "
                                 "its memory: " + "; ".join(bad.problems)[:200],
                                 hint="name the GPU with --gpu, or --gpu-memory with --gpu-arch")
    if len(names) > 1 or len(totals) > 1:
        raise EnvironmentProblem("this host has different GPUs: " + ", ".join(
            sorted(str(n) for n in names)), hint="name the one to plan for with --gpu")
    match = _catalog_match(first)
    arch = first.arch or (match.arch if match else "unknown")
    if match is not None and first.vendor == "nvidia" and first.arch and first.arch != match.arch:
        match = None
    source = f"this host ({first.vendor} driver {first.driver or '?'})"
    if match is not None:  # the catalog row's facts (interconnect, SMs), the host's total
        return replace(match, total_bytes=first.total_bytes, arch=arch or match.arch,
                       exact=True, source=source)
    return GPU(name=first.name or "local GPU", total_bytes=first.total_bytes,
               arch=arch if arch else "unknown", vendor=first.vendor, exact=True, source=source)


def _catalog_match(d: Device) -> GPU | None:
    from memprof.core.gpus import find_gpu

    if d.name:
        try:
            return find_gpu(d.name)
        except Exception:
            pass
    if d.total_bytes:  # by the total, within 1 %
        best = min(catalog(), key=lambda g: abs(g.total_bytes - (d.total_bytes or 0)))
        if abs(best.total_bytes - d.total_bytes) <= 0.01 * d.total_bytes and (
                best.vendor == d.vendor):
            return best
    return None
